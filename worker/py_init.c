/*
 * py_init.c - bring up the embedded interpreter.
 *
 * Isolated configuration (no PYTHON* environment, no user site), our
 * builtin module registered before initialisation, unbuffered stdio so a
 * cell's output reaches the supervisor's pipes as it is written, and the
 * runtime (the worker .py files, embedded at build time) loaded as module
 * "agentz_runtime": from the code objects compiled at build time when
 * this libpython's bytecode is theirs (compiling the sources took 2.7 ms
 * of every start), else from the sources. Every PyStatus is checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <marshal.h>
#include <stdio.h>
#include <string.h>

#include "worker/py.h"

PyObject *PyInit__agentz(void);

static int
status_ok(PyStatus st, PyConfig *cfg)
{
	if (!PyStatus_Exception(st))
		return 1;
	(void)fprintf(stderr, "agentz-worker: python init: %s%s%s\n",
	    st.func ? st.func : "", st.func ? ": " : "",
	    st.err_msg ? st.err_msg : "failed");
	PyConfig_Clear(cfg);
	return 0;
}

static int
config_init(PyConfig *cfg, const char *argv0)
{
	PyConfig_InitIsolatedConfig(cfg);
	cfg->install_signal_handlers = 1;	/* SIGINT -> KeyboardInterrupt */
	cfg->buffered_stdio = 0;
	cfg->site_import = 1;			/* Debian's dist-packages */
	cfg->user_site_directory = 0;
	cfg->write_bytecode = 0;
	cfg->faulthandler = 0;
	if (!status_ok(PyConfig_SetBytesString(cfg, &cfg->program_name,
	    argv0), cfg))
		return -1;
	if (!status_ok(PyConfig_SetString(cfg, &cfg->stdio_encoding,
	    L"utf-8"), cfg))
		return -1;
	if (!status_ok(PyConfig_SetString(cfg, &cfg->stdio_errors,
	    L"backslashreplace"), cfg))
		return -1;
	return 0;
}

/* Whether the build's compiled runtime is bytecode of this libpython. */
static int
code_usable(void)
{
	long magic = PyImport_GetMagicNumber();
	unsigned char want[4];

	if (magic == -1) {
		PyErr_Clear();
		return 0;
	}
	want[0] = (unsigned char)(magic & 0xff);
	want[1] = (unsigned char)((magic >> 8) & 0xff);
	want[2] = (unsigned char)((magic >> 16) & 0xff);
	want[3] = (unsigned char)((magic >> 24) & 0xff);
	return memcmp(want, embedded_runtime_code_magic_bytes, 4) == 0;
}

/* Runtime file i as a code object: the compiled one, or its source. */
static PyObject *
runtime_code(size_t i, int compiled)
{
	PyObject *code;

	if (compiled) {
		code = PyMarshal_ReadObjectFromString(
		    embedded_runtime_code[i].text,
		    (Py_ssize_t)embedded_runtime_code[i].len);
		if (code != NULL && PyCode_Check(code))
			return code;
		Py_XDECREF(code);
		PyErr_Clear();
	}
	return Py_CompileString(embedded_runtime[i].text,
	    embedded_runtime[i].name, Py_file_input);
}

/* Executes each embedded runtime file in the module agentz_runtime. */
static int
load_runtime(void)
{
	PyObject *mod, *dict, *code, *res;
	int compiled = code_usable();
	size_t i;

	mod = PyImport_AddModule("agentz_runtime");	/* borrowed */
	if (mod == NULL)
		return -1;
	dict = PyModule_GetDict(mod);
	for (i = 0; i < embedded_runtime_count; i++) {
		code = runtime_code(i, compiled);
		if (code == NULL)
			return -1;
		res = PyEval_EvalCode(code, dict, dict);
		Py_DECREF(code);
		if (res == NULL)
			return -1;
		Py_DECREF(res);
	}
	return 0;
}

int
py_init(const char *argv0, const char **version)
{
	PyConfig cfg;

	if (PyImport_AppendInittab("_agentz", PyInit__agentz) < 0) {
		(void)fprintf(stderr, "agentz-worker: inittab failed\n");
		return -1;
	}
	if (config_init(&cfg, argv0) < 0)
		return -1;
	if (!status_ok(Py_InitializeFromConfig(&cfg), &cfg))
		return -1;
	PyConfig_Clear(&cfg);
	if (load_runtime() < 0 || py_fork_init() < 0) {
		PyErr_Print();
		return -1;
	}
	*version = Py_GetVersion();
	return 0;
}
