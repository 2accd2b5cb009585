/*
 * embed_init - how long Py_InitializeEx(0) takes in a bare embedding
 * program linked against the system libpython (the same one the agentz
 * worker embeds). One measurement per process, so the caller runs it
 * several times. Prints one line of JSON:
 *   {"init_us":I,"total_us":T,"version":"3.11.2 ..."}
 * init_us is Py_InitializeEx alone; total_us adds a trivial statement
 * ("x = 1") and Py_FinalizeEx.
 *
 * Built by bench/run.py with `pkg-config --cflags --libs python3-embed`;
 * not part of the agentz build.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(void)
{
	double t0 = now_us();
	Py_InitializeEx(0);
	double t1 = now_us();
	if (!Py_IsInitialized()) {
		fprintf(stderr, "embed_init: Py_InitializeEx failed\n");
		return 1;
	}
	if (PyRun_SimpleString("x = 1") != 0) {
		fprintf(stderr, "embed_init: PyRun_SimpleString failed\n");
		return 1;
	}
	char version[128];
	snprintf(version, sizeof version, "%s", Py_GetVersion());
	for (char *p = version; *p; p++)
		if (*p == '"' || *p == '\\' || *p == '\n')
			*p = ' ';
	if (Py_FinalizeEx() < 0)
		return 1;
	double t2 = now_us();
	printf("{\"init_us\":%.1f,\"total_us\":%.1f,\"version\":\"%s\"}\n",
	       t1 - t0, t2 - t0, version);
	return 0;
}
