package dev.cdclake.rest;

import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.net.Socket;
import org.eclipse.jetty.http.UriCompliance;
import org.eclipse.jetty.server.ConnectionFactory;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Runs Iceberg's REST catalog server ({@code org.apache.iceberg.rest.RESTCatalogServer}, configured by its
 * {@code CATALOG_*} environment variables) with two changes to its HTTP connector:
 *
 * <ul>
 *   <li>it listens on {@code -Dcdclake.rest.host} (default 127.0.0.1) instead of every interface;
 *   <li>it accepts {@code %1F} in paths: the REST specification's default separator of nested namespaces
 *       ({@code /v1/namespaces/pg%1Finventory/tables/customers}), which DuckDB's iceberg extension sends and
 *       Jetty refuses by default as a suspicious path character.
 * </ul>
 *
 * <p>The server's constructor and its Jetty server are not public, so they are reached by reflection.
 */
public final class RestCatalogLauncher {
  private RestCatalogLauncher() {}

  public static void main(String[] args) throws Exception {
    String host = System.getProperty("cdclake.rest.host", "127.0.0.1");
    Class<?> serverClass = Class.forName("org.apache.iceberg.rest.RESTCatalogServer");
    Constructor<?> constructor = serverClass.getDeclaredConstructor();
    constructor.setAccessible(true);
    Object catalogServer = constructor.newInstance();
    serverClass.getMethod("start", boolean.class).invoke(catalogServer, false);
    Field field = serverClass.getDeclaredField("httpServer");
    field.setAccessible(true);
    Server http = (Server) field.get(catalogServer);
    UriCompliance compliance =
        UriCompliance.DEFAULT.with(
            "DEFAULT+nested-namespaces", UriCompliance.Violation.SUSPICIOUS_PATH_CHARACTERS);
    for (Connector connector : http.getConnectors()) {
      for (ConnectionFactory factory : connector.getConnectionFactories()) {
        if (factory instanceof HttpConnectionFactory httpFactory) {
          httpFactory.getHttpConfiguration().setUriCompliance(compliance);
        }
      }
      if (connector instanceof ServerConnector serverConnector) {
        serverConnector.stop();
        serverConnector.setHost(host);
        serverConnector.start();
        acceptsConnections(serverConnector, host);
      }
    }
    System.out.println("cdclake: Iceberg REST catalog listening on " + host + " (nested namespaces with %1F)");
    http.join();
  }

  /**
   * Connects to the restarted connector once, and restarts it again (up to five times) while the connection is
   * refused, so the server never reports it listens on a port nothing accepts on; exits with status 1 if it never
   * accepts.
   */
  private static void acceptsConnections(ServerConnector connector, String host) throws Exception {
    int port = connector.getLocalPort();
    for (int attempt = 1; attempt <= 5; attempt++) {
      try (Socket socket = new Socket()) {
        socket.connect(new InetSocketAddress(host, port), 2000);
        return;
      } catch (IOException e) {
        System.err.println(
            "cdclake: " + host + ":" + port + " refused a connection after the connector's restart (" + e
                + "); restarting it, attempt " + attempt);
        connector.stop();
        connector.start();
      }
    }
    System.err.println("cdclake: the REST catalog's connector never accepted connections on " + host + ":" + port);
    System.exit(1);
  }
}
