package dev.cdclake.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}) that sets permissions through {@code java.nio} instead of a
 * {@code chmod} process.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem#setPermission} runs
 * {@code chmod} in a new process for every file it creates: every Iceberg data, delete, manifest and metadata
 * file of the embedded lake, and their {@code .crc} files. A local driver sets {@code fs.file.impl} to this
 * class (see {@code cdclake.spark.LOCAL_FILE_SYSTEM}). Modes with the sticky, setuid or setgid bit, which
 * {@code java.nio} cannot set, still go to {@code chmod}.
 */
public class NioLocalFileSystem extends LocalFileSystem {

  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system underneath, with {@link #setPermission} through {@code java.nio}. */
  public static class Raw extends RawLocalFileSystem {
    /** Permission bits from the lowest (others execute) to the highest (owner read). */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      if ((mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), permissions(mode));
    }

    /** The {@code java.nio} permissions of a mode's lowest nine bits. */
    static Set<PosixFilePermission> permissions(int mode) {
      Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          out.add(BITS[i]);
        }
      }
      return out;
    }
  }
}
