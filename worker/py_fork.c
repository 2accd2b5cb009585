/*
 * py_fork.c - CPython's side of a snapshot (worker/snap.c): what to say
 * and flush once it is forked, CPython's fork bracket (no at-fork hooks),
 * and the repairs the runtime makes once a snapshot is promoted.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "worker/py.h"

#define THREADS_MAX 4096	/* bytes of thread names in SNAPPED */

/* Calls agentz_runtime.<fn>(); a new reference or NULL (error printed). */
static PyObject *
call_runtime(const char *fn)
{
	PyObject *mod = PyImport_AddModule("agentz_runtime"), *r = NULL;

	if (mod != NULL)
		r = PyObject_CallMethod(mod, fn, NULL);
	if (r == NULL)
		PyErr_Print();
	return r;
}

char *
py_snap_threads(void)
{
	PyObject *r = call_runtime("_before_snapshot");
	const char *s = NULL;
	Py_ssize_t n = 0;
	char *out;

	if (r != NULL && PyUnicode_Check(r))
		s = PyUnicode_AsUTF8AndSize(r, &n);
	if (s == NULL) {
		PyErr_Clear();
		s = "";
		n = 0;
	}
	if (n > THREADS_MAX) {		/* cut at a character boundary */
		n = THREADS_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	out = malloc((size_t)n + 1);
	if (out != NULL) {
		memcpy(out, s, (size_t)n);
		out[n] = '\0';
	}
	Py_XDECREF(r);
	return out;
}

/* _imp.lock_held, taken at start-up, before any cell could replace it:
 * a C function, so calling it at a snapshot runs no cell code. */
static PyObject *imp_lock_held;

int
py_fork_init(void)
{
	PyObject *imp = PyImport_ImportModule("_imp");

	if (imp != NULL)
		imp_lock_held = PyObject_GetAttrString(imp, "lock_held");
	Py_XDECREF(imp);
	return imp_lock_held != NULL ? 0 : -1;
}

int
py_import_lock_busy(void)
{
	PyObject *r;
	int busy;

	if (imp_lock_held == NULL)
		return 0;
	r = PyObject_CallNoArgs(imp_lock_held);
	if (r == NULL)
		PyErr_Clear();
	busy = r == Py_True;
	Py_XDECREF(r);
	return busy;
}

/*
 * CPython's fork bracket without its at-fork hooks: PyOS_BeforeFork runs
 * os.register_at_fork's before= hooks, code a cell chose, on this thread
 * right before the snapshot's fork (it could fork a child of its own and
 * name it in a forged SNAPPED); PyOS_AfterFork_Parent runs the
 * after_in_parent ones. What they guard is kept: the import lock is held
 * across the fork (PyOS_AfterFork_Child re-creates it in the snapshot).
 */
void
py_fork_before(void)
{
	_PyImport_AcquireLock();
}

void
py_fork_parent(void)
{
	if (_PyImport_ReleaseLock() <= 0)
		Py_FatalError("failed releasing import lock after fork");
}

void
py_fork_child(void)
{
	PyOS_AfterFork_Child();
}

void
py_promoted(void)
{
	Py_XDECREF(call_runtime("_after_promotion"));
}

void
py_nogil(void (*fn)(void))
{
	Py_BEGIN_ALLOW_THREADS
	fn();
	Py_END_ALLOW_THREADS
}
