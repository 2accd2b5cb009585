/*
 * jsonf.h - JSON objects from typed fields, and typed fields read back
 * from a JSON object: how the modules that do not own a JSON format
 * (the agent's journal records and control replies, the runner's errors,
 * the command line's views) write and read JSON without jansson. Unlike
 * json_pack's format strings the fields are checked by the compiler.
 *
 * Writing: an array of fields ended by JF_END, e.g.
 *
 *	struct jf f[] = { JF_I("exit", rc), JF_S("reason", why),
 *	    JF_R("at", now), JF_END };
 *	char *s = jf_dumps(f, &len);
 *
 * Strings are made valid UTF-8 (a bad byte becomes U+FFFD); a NULL
 * string or object is written as null; JF_SKIP (or a field chosen away
 * with `cond ? JF_R(...) : JF_SKIP`) is left out.
 */
#ifndef AGENTZ_JSONF_H
#define AGENTZ_JSONF_H

#include <stddef.h>

enum jf_kind {
	JF_KEND = 0,	/* the end of the fields */
	JF_KINT,	/* long long */
	JF_KREAL,	/* double (written as a JSON real) */
	JF_KSTR,	/* s, n bytes (SIZE_MAX: strlen) */
	JF_KBOOL,	/* b */
	JF_KNULL,	/* null */
	JF_KOBJ,	/* the fields at obj (NULL: null) */
	JF_KINTS,	/* an array of n long longs at ints */
	JF_KRAW,	/* s: JSON text kept as it is (must parse) */
	JF_KSKIP	/* left out */
};

struct jf {
	const char *key;
	enum jf_kind kind;
	long long i;
	double d;
	const char *s;
	size_t n;
	const struct jf *obj;
	const long long *ints;
};

#define JF_(k, kd, ...)	((struct jf){ .key = (k), .kind = (kd), __VA_ARGS__ })
#define JF_I(k, x)	JF_(k, JF_KINT, .i = (long long)(x))
#define JF_R(k, x)	JF_(k, JF_KREAL, .d = (double)(x))
#define JF_S(k, x)	JF_(k, JF_KSTR, .s = (x), .n = (size_t)-1)
#define JF_SN(k, x, len) JF_(k, JF_KSTR, .s = (x), .n = (len))
#define JF_B(k, x)	JF_(k, JF_KBOOL, .i = (x) ? 1 : 0)
#define JF_N(k)		JF_(k, JF_KNULL, .i = 0)
#define JF_O(k, f)	JF_(k, JF_KOBJ, .obj = (f))
#define JF_IA(k, a, cnt) JF_(k, JF_KINTS, .ints = (a), .n = (cnt))
#define JF_J(k, text)	JF_(k, JF_KRAW, .s = (text))
#define JF_SKIP		JF_(NULL, JF_KSKIP, .i = 0)
#define JF_END		JF_(NULL, JF_KEND, .i = 0)

/*
 * The object's compact text (malloc'ed, NUL-terminated; *len its length
 * when len is not NULL). NULL with errno: ENOMEM, EINVAL for a JF_J text
 * that is not JSON.
 */
char *jf_dumps(const struct jf *f, size_t *len);

/*
 * s (n bytes; (size_t)-1: strlen) as a JSON string literal, quotes
 * included, made valid UTF-8 (malloc'ed, NUL-terminated). NULL / ENOMEM.
 */
char *jf_string(const char *s, size_t n);

/* --- reading ----------------------------------------------------------------- */

/*
 * One field to read: key, the kind expected and where it goes. JF_KINT:
 * long long * (a real is not taken); JF_KREAL: double * (an integer is
 * taken); JF_KSTR: char ** (malloc'ed, NUL-terminated; *len its length,
 * which counts NULs the text may hold, when len is not NULL); JF_KBOOL:
 * int *; JF_KOBJ: the nested fields at sub (ended by a key of NULL).
 * found: 1 read, 0 absent or null, -1 of another type (dst untouched).
 */
struct jf_in {
	const char *key;
	enum jf_kind kind;
	void *dst;
	size_t *len;
	struct jf_in *sub;
	int found;
};

/*
 * Reads the fields from text (len bytes), a JSON object. 0, or -1 with
 * errno: EINVAL for text that is not a JSON object, ENOMEM (strings read
 * so far are freed then). jf_in_free frees the strings read (and sets
 * the pointers to NULL).
 */
int jf_parse(const char *text, size_t len, struct jf_in *in);
void jf_in_free(struct jf_in *in);

#endif
