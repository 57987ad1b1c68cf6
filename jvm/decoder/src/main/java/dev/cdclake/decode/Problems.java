package dev.cdclake.decode;

/**
 * What went wrong while reading one record, besides a syntax error (which Jackson raises).
 *
 * <p>{@code mismatch}: a value does not have the JSON type its column's wire type needs (a string where a number
 * belongs): the record is a {@code type_mismatch} dead letter, as with Spark's {@code from_json}.
 * {@code invalid}: a value has the right JSON type but cannot be represented (a decimal wider than its column,
 * invalid base64, a timestamp out of range): the record is an {@code unrepresentable_value} dead letter.
 */
final class Problems {
  boolean mismatch;
  boolean invalid;
  /** a row image has a field its plan does not know: the record is an {@code unknown_field} dead letter */
  boolean unknownField;

  void reset() {
    mismatch = false;
    invalid = false;
    unknownField = false;
  }
}
