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

#include <stdio.h>
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

/*
 * s (n bytes of UTF-8) kept to limit bytes the way the supervisor keeps
 * cell output: the first half, a marker line counting what was dropped,
 * the last half; cuts moved to character boundaries.
 */
static void
set_capped(struct bytes *b, const char *s, size_t n, size_t limit)
{
	size_t head = limit / 2, tail = limit - limit / 2, m;
	char marker[64];

	while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
		head--;
	while (tail > 0 && ((unsigned char)s[n - tail] & 0xc0) == 0x80)
		tail--;
	m = (size_t)snprintf(marker, sizeof marker,
	    "\n[... %zu bytes dropped ...]\n", n - head - tail);
	b->ptr = malloc(head + m + tail + 1);
	if (b->ptr == NULL) {
		b->len = 0;
		return;
	}
	memcpy(b->ptr, s, head);
	memcpy(b->ptr + head, marker, m);
	memcpy(b->ptr + head + m, s + n - tail, tail);
	b->len = head + m + tail;
	b->ptr[b->len] = '\0';
}

static void
set_from_obj(struct bytes *b, PyObject *o, size_t limit)
{
	const char *s = NULL;
	Py_ssize_t n = 0;

	if (o != NULL && PyUnicode_Check(o))
		s = PyUnicode_AsUTF8AndSize(o, &n);
	if (s == NULL)
		PyErr_Clear();
	if (s != NULL && (size_t)n > limit && limit > 0)
		set_capped(b, s, (size_t)n, limit);
	else
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
unpack_result(PyObject *res, size_t limit, struct msg_done *out)
{
	long status;

	if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 3)
		return -1;
	status = PyLong_AsLong(PyTuple_GET_ITEM(res, 0));
	if (status < 0 || status > DONE_STATUS_MAX)
		return -1;
	out->status = (uint32_t)status;
	set_from_obj(&out->exception_type, PyTuple_GET_ITEM(res, 1), limit);
	set_from_obj(&out->traceback, PyTuple_GET_ITEM(res, 2), limit);
	return 0;
}

void
py_run_cell(uint32_t cell, const struct bytes *code, size_t limit,
    struct msg_done *out)
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
	if (unpack_result(res, limit, out) < 0) {
		msg_clear(&(struct msg){ .type = MSG_DONE, .u.done = *out });
		memset(out, 0, sizeof *out);
		out->cell = cell;
		out->status = DONE_ERROR;
		set_bytes(&out->exception_type, "RuntimeError");
		set_bytes(&out->traceback, "bad result from run_cell\n");
	}
	Py_DECREF(res);
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
