package dev.cdclake.decode;

/** Strict UTF-8 validation of a record's bytes (JSON text must be UTF-8; Jackson checks only what it decodes). */
final class Utf8 {
  private Utf8() {}

  /** True when {@code b} is well-formed UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
  static boolean valid(byte[] b) {
    int i = 0;
    int n = b.length;
    while (i < n && b[i] >= 0) {
      i++; // ASCII, the usual case
    }
    while (i < n) {
      int c = b[i] & 0xff;
      if (c < 0x80) {
        i++;
        continue;
      }
      int extra;
      int min;
      if (c >= 0xc2 && c <= 0xdf) {
        extra = 1;
        min = 0x80;
      } else if (c >= 0xe0 && c <= 0xef) {
        extra = 2;
        min = 0x800;
      } else if (c >= 0xf0 && c <= 0xf4) {
        extra = 3;
        min = 0x10000;
      } else {
        return false;
      }
      if (i + extra >= n) {
        return false;
      }
      int cp = c & (0x3f >> extra);
      for (int k = 1; k <= extra; k++) {
        int cc = b[i + k] & 0xff;
        if ((cc & 0xc0) != 0x80) {
          return false;
        }
        cp = (cp << 6) | (cc & 0x3f);
      }
      if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return false;
      }
      i += extra + 1;
    }
    return true;
  }
}
