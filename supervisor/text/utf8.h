/*
 * utf8.h - make arbitrary bytes (a cell's output may hold anything) into
 * valid UTF-8 for JSON and the terminal.
 */
#ifndef AGENTZ_UTF8_H
#define AGENTZ_UTF8_H

#include <stddef.h>

/*
 * Returns a malloc'ed, NUL-terminated copy of p[0..n) in which every byte
 * that is not part of a valid UTF-8 sequence (overlongs, surrogates and
 * code points above U+10FFFF included) is replaced by U+FFFD. NUL bytes
 * are kept (so use *outlen, not strlen). NULL / ENOMEM.
 */
char *utf8_sanitize(const char *p, size_t n, size_t *outlen);
/* The length (1-4) of the valid UTF-8 sequence at p[0..n), 0 when it is
 * not one (n >= 1). */
size_t utf8_seq_len(const unsigned char *p, size_t n);

#endif
