/*
 * py_exec.c - run one cell through the runtime's run_cell() and turn its
 * result into a DONE message.
 *
 * run_cell (worker/runtime.py) compiles with top-level await, registers the
 * source with linecache, runs it in the persistent namespace and returns
 * (status, exception_type, traceback). Anything that escapes it (a
 * KeyboardInterrupt landing between the cell and the return, say) is
 * classified here so the supervisor always gets its DONE.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "worker/chan.h"
#include "worker/py.h"

static void
set_bytes(struct bytes *b, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	b->ptr = malloc(n + 1);
	if (b->ptr == NULL) {
		b->len = 0;
		return;
	}
	if (n > 0)
		memcpy(b->ptr, s, n);
	b->ptr[n] = '\0';
	b->len = n;
}

static void
set_from_obj(struct bytes *b, PyObject *o)
{
	const char *s = NULL;

	if (o != NULL && PyUnicode_Check(o))
		s = PyUnicode_AsUTF8(o);
	if (s == NULL)
		PyErr_Clear();
	set_bytes(b, s);
}

/* Classifies an exception that escaped run_cell itself. */
static void
escaped(struct msg_done *out)
{
	PyObject *type, *value, *tb;

	PyErr_Fetch(&type, &value, &tb);
	if (type != NULL && (PyErr_GivenExceptionMatches(type,
	    PyExc_KeyboardInterrupt) || PyErr_GivenExceptionMatches(type,
	    PyExc_SystemExit)))
		out->status = DONE_INTERRUPTED;
	else
		out->status = DONE_ERROR;
	set_bytes(&out->exception_type, type != NULL ?
	    ((PyTypeObject *)type)->tp_name : "RuntimeError");
	set_bytes(&out->traceback, "the exception escaped the cell runner\n");
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
}

static int
unpack_result(PyObject *res, struct msg_done *out)
{
	long status;

	if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 3)
		return -1;
	status = PyLong_AsLong(PyTuple_GET_ITEM(res, 0));
	if (status < 0 || status > DONE_STATUS_MAX)
		return -1;
	out->status = (uint32_t)status;
	set_from_obj(&out->exception_type, PyTuple_GET_ITEM(res, 1));
	set_from_obj(&out->traceback, PyTuple_GET_ITEM(res, 2));
	return 0;
}

void
py_run_cell(uint32_t cell, const struct bytes *code, struct msg_done *out)
{
	PyObject *mod = NULL, *res = NULL;

	memset(out, 0, sizeof *out);
	out->cell = cell;
	/* A SIGINT meant for the previous cell must not hit this one. */
	if (PyErr_CheckSignals() < 0)
		PyErr_Clear();
	mod = PyImport_AddModule("agentz_runtime");	/* borrowed */
	if (mod != NULL)
		res = PyObject_CallMethod(mod, "run_cell", "Iy#", cell,
		    code->ptr, (Py_ssize_t)code->len);
	if (res == NULL) {
		escaped(out);
		return;
	}
	if (unpack_result(res, out) < 0) {
		msg_clear(&(struct msg){ .type = MSG_DONE, .u.done = *out });
		memset(out, 0, sizeof *out);
		out->cell = cell;
		out->status = DONE_ERROR;
		set_bytes(&out->exception_type, "RuntimeError");
		set_bytes(&out->traceback, "bad result from run_cell\n");
	}
	Py_DECREF(res);
}

void
py_preload(void)
{
	PyObject *m = PyImport_ImportModule("traceback");

	if (m == NULL)
		PyErr_Clear();
	Py_XDECREF(m);
}

int
py_wait_exec(struct msg *m)
{
	int rc;

	Py_BEGIN_ALLOW_THREADS
	rc = chan_wait_exec(m);
	Py_END_ALLOW_THREADS
	return rc;
}

int
py_send(const struct msg *m)
{
	int rc;

	Py_BEGIN_ALLOW_THREADS
	rc = chan_send(m);
	Py_END_ALLOW_THREADS
	return rc;
}
