package dev.cdclake.decode.spark;

import dev.cdclake.decode.Decoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF4;

/**
 * The Spark SQL function cdclake.decode registers for one topic's plan:
 * {@code (value binary, key binary, partition int, offset bigint) -> struct<outputs of the plan>}.
 *
 * <p>The plan is checked when the function is made (a bad plan fails the registration, not a task); each
 * deserialised copy (one per task) builds its own decoder on first use.
 */
public final class DecodeFunction implements UDF4<byte[], byte[], Integer, Long, Row> {
  private static final long serialVersionUID = 1L;

  private final String plan;
  private transient Decoders.Decoder decoder;

  public DecodeFunction(String plan) {
    this.plan = plan;
    Decoders.of(plan);
  }

  @Override
  public Row call(byte[] value, byte[] key, Integer partition, Long offset) {
    Decoders.Decoder d = decoder;
    if (d == null) {
      d = Decoders.of(plan);
      decoder = d;
    }
    return RowFactory.create(d.decode(value, key, partition == null ? 0 : partition, offset == null ? 0L : offset));
  }
}
