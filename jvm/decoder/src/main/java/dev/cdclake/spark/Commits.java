package dev.cdclake.spark;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;

/**
 * Statements whose Iceberg commits carry snapshot-summary properties of their own, in a session that other
 * threads use at the same time.
 *
 * <p>Iceberg takes the properties of a SQL statement's commit (a {@code MERGE}, say) from the session's
 * {@code spark.sql.iceberg.snapshot-property.*} settings, which every thread of the session sees, or from the
 * properties of {@code org.apache.iceberg.spark.CommitMetadata}, which only the calling thread's commits see.
 * cdclake applies a batch's tables in threads of one session, each commit with its table's properties: through
 * {@link #sql}, no thread waits for another's statement to put the session's settings back.
 *
 * <p>{@code CommitMetadata} is looked up through the calling thread's context class loader: this jar is also on
 * a local driver's class path (for {@code dev.cdclake.fs}), where the Iceberg runtime, loaded with
 * {@code spark.jars}, is not.
 */
public final class Commits {

  static final String COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata";

  private Commits() {}

  /**
   * Runs {@code sql} in {@code spark} on the calling thread; every Iceberg commit it makes carries
   * {@code properties} in its snapshot summary.
   *
   * @throws Exception what the statement threw, unwrapped (an {@code AnalysisException}, a commit's failure)
   */
  public static void sql(SparkSession spark, String sql, Map<String, String> properties) throws Exception {
    Callable<Object> statement =
        () -> {
          spark.sql(sql);
          return null;
        };
    Class<?> metadata =
        Class.forName(COMMIT_METADATA, true, Thread.currentThread().getContextClassLoader());
    Method with =
        metadata.getMethod("withCommitProperties", Map.class, Callable.class, Class.class);
    try {
      with.invoke(null, properties, statement, Exception.class);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof Exception exception) {
        throw exception;
      }
      throw (Error) cause;
    }
  }
}
