/*
 * size.h - a size as the operator writes it (64M, 4G, 1.5MiB, 1024) in
 * bytes, for the options and agentz report's -m.
 */
#ifndef AGENTZ_SIZE_H
#define AGENTZ_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Size like 64M / 4G / 1024 into bytes. -1 on a malformed value. */
int size_parse(const char *s, uint64_t *out);
/* n as the operator would write it, exactly: "64M", "4K", "100 bytes". */
void size_format(uint64_t n, char *out, size_t len);

#endif
