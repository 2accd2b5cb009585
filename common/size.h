/*
 * size.h - a size as the operator writes it (64M, 4G, 1.5MiB, 1024) in
 * bytes, for the options and agentz report's -m; and numbers (seconds,
 * USD) as a person reads them (3600, 0.5, 1.25: never an exponent).
 */
#ifndef AGENTZ_SIZE_H
#define AGENTZ_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Size like 64M / 4G / 1024 into bytes. -1 on a malformed value. */
int size_parse(const char *s, uint64_t *out);
/* n as the operator would write it, exactly: "64M", "4K", "100 bytes". */
void size_format(uint64_t n, char *out, size_t len);
/* v in plain decimals, at most 3 after the point and no trailing zeros
 * ("3600", "0.5", "1.25"; a positive v under 0.0005 with up to 6). */
void size_plain(double v, char *out, size_t len);

#endif
