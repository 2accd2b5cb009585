/*
 * py_module.c - the builtin module "_agentz" through which cell code talks
 * to the supervisor.
 *
 *   begin(method: str, body: bytes, cell: int) -> id
 *       sends a REQUEST frame and registers a waiter for its replies.
 *   wait(id) -> ("reply" | "event", status: int, body: bytes)
 *       blocks with the GIL released until the next frame for id. On the
 *       main thread the wait is sliced so that SIGINT raises
 *       KeyboardInterrupt in the cell instead of being held off.
 *   end(id)
 *       forgets the waiter; later frames for id are dropped.
 *   engine_source() -> the engine's source text, one str
 *       the engine's own sources, embedded at build time.
 *   file_key(path) -> (dev, ino, size, mtime_ns, ctime_ns) or None
 *       what tells a file's versions apart, None when stat(2) fails: one
 *       system call and no exception, for a check made before every cell.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/chan.h"
#include "worker/py.h"

#define WAIT_SLICE_MS 20

static pthread_t main_thread;

static PyObject *
mod_begin(PyObject *self, PyObject *args)
{
	const char *method, *body;
	Py_ssize_t mlen, blen;
	unsigned int cell;
	struct msg m;
	uint64_t id;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(args, "s#y#I", &method, &mlen, &body, &blen,
	    &cell))
		return NULL;
	id = chan_waiter_new();
	if (id == 0)
		return PyErr_NoMemory();
	memset(&m, 0, sizeof m);
	m.type = MSG_REQUEST;
	m.u.request.id = id;
	m.u.request.cell = cell;
	m.u.request.method.ptr = (char *)(uintptr_t)method;
	m.u.request.method.len = (size_t)mlen;
	m.u.request.body.ptr = (char *)(uintptr_t)body;
	m.u.request.body.len = (size_t)blen;
	Py_BEGIN_ALLOW_THREADS
	rc = chan_send(&m);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		chan_waiter_free(id);
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	return PyLong_FromUnsignedLongLong(id);
}

static PyObject *
frame_tuple(struct msg *m)
{
	PyObject *t;

	if (m->type == MSG_REPLY)
		t = Py_BuildValue("sIy#", "reply", m->u.reply.status,
		    m->u.reply.body.ptr, (Py_ssize_t)m->u.reply.body.len);
	else
		t = Py_BuildValue("sIy#", "event", 0u, m->u.event.body.ptr,
		    (Py_ssize_t)m->u.event.body.len);
	msg_clear(m);
	return t;
}

static PyObject *
mod_wait(PyObject *self, PyObject *args)
{
	unsigned long long id;
	struct msg m;
	int rc, is_main, slice;

	(void)self;
	if (!PyArg_ParseTuple(args, "K", &id))
		return NULL;
	is_main = pthread_equal(pthread_self(), main_thread);
	slice = is_main ? WAIT_SLICE_MS : 1000;
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		rc = chan_waiter_wait(id, slice, &m);
		Py_END_ALLOW_THREADS
		if (rc > 0)
			return frame_tuple(&m);
		if (rc < 0) {
			PyErr_Format(PyExc_ValueError,
			    "no outstanding request with id %llu", id);
			return NULL;
		}
		if (is_main && PyErr_CheckSignals() < 0)
			return NULL;
	}
}

static PyObject *
mod_end(PyObject *self, PyObject *args)
{
	unsigned long long id;

	(void)self;
	if (!PyArg_ParseTuple(args, "K", &id))
		return NULL;
	chan_waiter_free(id);
	Py_RETURN_NONE;
}

/*
 * Makes the pages of [p, p + len) present in one call instead of a page
 * fault each: for the engine's 1.3 MB, 3.3 -> 2.3 ms in the worker here
 * (a fault is a hypercall on this kind of VM). Best effort: before Linux 5.14 the
 * advice is unknown and the faults happen as before.
 */
static void
populate(void *p, size_t len)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

static int
all_ascii(const char *s, size_t len)
{
	uint64_t acc = 0, w;
	size_t i = 0;

	for (; i + sizeof w <= len; i += sizeof w) {
		memcpy(&w, s + i, sizeof w);
		acc |= w;
	}
	for (; i < len; i++)
		acc |= (unsigned char)s[i];
	return (acc & UINT64_C(0x8080808080808080)) == 0;
}

static PyObject *
mod_engine_source(PyObject *self, PyObject *noargs)
{
	PyObject *s;

	(void)self;
	(void)noargs;
	/* scripts/embed.py refuses a non-ASCII byte; checked again, since a
	 * compact ASCII str holding one would break the str's invariants */
	if (!all_ascii(embedded_engine_text, embedded_engine_len))
		return PyUnicode_DecodeASCII(embedded_engine_text,
		    (Py_ssize_t)embedded_engine_len, "replace");
	s = PyUnicode_New((Py_ssize_t)embedded_engine_len, 127);
	if (s == NULL)
		return NULL;
	populate(PyUnicode_1BYTE_DATA(s), embedded_engine_len);
	memcpy(PyUnicode_1BYTE_DATA(s), embedded_engine_text,
	    embedded_engine_len);
	return s;
}

static PyObject *
mod_file_key(PyObject *self, PyObject *args)
{
	const char *path;
	struct stat st;
	int rc;

	(void)self;
	if (!PyArg_ParseTuple(args, "s", &path))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = stat(path, &st);
	Py_END_ALLOW_THREADS
	if (rc < 0)
		Py_RETURN_NONE;
	return Py_BuildValue("(KKLLL)", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino, (long long)st.st_size,
	    (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
	    (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
}

static PyMethodDef mod_methods[] = {
	{"begin", mod_begin, METH_VARARGS, "Send a request to the supervisor."},
	{"wait", mod_wait, METH_VARARGS, "Wait for the next reply or event."},
	{"end", mod_end, METH_VARARGS, "Forget a request."},
	{"engine_source", mod_engine_source, METH_NOARGS,
	    "The engine's source text (ENGINE_SOURCE), embedded at build "
	    "time."},
	{"file_key", mod_file_key, METH_VARARGS,
	    "(dev, ino, size, mtime_ns, ctime_ns) of a path, or None."},
	{NULL, NULL, 0, NULL}
};

static struct PyModuleDef mod_def = {
	PyModuleDef_HEAD_INIT, "_agentz",
	"Host interface of the agentz worker.", -1, mod_methods,
	NULL, NULL, NULL, NULL
};

PyObject *PyInit__agentz(void);

/* Also the compile flag run_cell needs (so the runtime does not import
 * _ast, about 1 ms of every start, for one constant). */
PyObject *
PyInit__agentz(void)
{
	PyObject *m;

	main_thread = pthread_self();
	m = PyModule_Create(&mod_def);
	if (m != NULL && PyModule_AddIntConstant(m,
	    "PyCF_ALLOW_TOP_LEVEL_AWAIT", PyCF_ALLOW_TOP_LEVEL_AWAIT) < 0)
		Py_CLEAR(m);
	return m;
}
