/*
 * path.h - absolute path helpers (no allocation, no I/O).
 */
#ifndef AGENTZ_PATH_H
#define AGENTZ_PATH_H

/* 1 when path is dir or lies below it (both absolute and normalised). */
int path_under(const char *path, const char *dir);

#endif
