package dev.cdclake.decode;

/** The public entry to the decoders (the rest of the package is internal). */
public final class Decoders {
  private Decoders() {}

  /** A record decoder: one per thread. */
  public interface Decoder {
    /** The outputs of one record (null value: a tombstone; null key: none), in the plan's order. */
    Object[] decode(byte[] value, byte[] key, int partition, long offset);

    /** The outputs of one record without a key. */
    default Object[] decode(byte[] value, int partition, long offset) {
      return decode(value, null, partition, offset);
    }
  }

  /**
   * The decoder of a plan (JSON written by cdclake.decode).
   *
   * @throws IllegalArgumentException when the plan is not valid
   */
  public static Decoder of(String plan) {
    RecordDecoder d = RecordDecoder.of(plan);
    return d::decode;
  }
}
