/*
 * path.c - absolute path helpers (see path.h).
 */
#include "common/path.h"

#include <string.h>

int
path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '/' ||
	    path[n] == '\0');
}
