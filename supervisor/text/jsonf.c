/*
 * jsonf.c - JSON objects from typed fields and back (see jsonf.h), on
 * jansson. Runs in the supervisor; may allocate.
 */
#include "supervisor/text/jsonf.h"
#include "supervisor/text/jsonf_tree.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "supervisor/text/utf8.h"

json_t *
jf_str_json(const char *s, size_t n)
{
	size_t len;
	char *clean;
	json_t *j;

	if (s == NULL)
		return json_null();
	if (n == (size_t)-1)
		n = strlen(s);
	if ((clean = utf8_sanitize(s, n, &len)) == NULL)
		return NULL;
	j = json_stringn_nocheck(clean, len);
	free(clean);
	return j;
}

static json_t *
ints_value(const long long *v, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, json_integer(v[i])) < 0) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

static json_t *
raw_value(const char *text)
{
	json_t *j;

	if (text == NULL)
		return json_null();
	j = json_loads(text, JSON_DECODE_ANY, NULL);
	if (j == NULL)
		errno = EINVAL;
	return j;
}

static json_t *
field_value(const struct jf *f)
{
	switch (f->kind) {
	case JF_KINT:
		return json_integer(f->i);
	case JF_KREAL:	/* NaN and infinities have no JSON form */
		return isfinite(f->d) ? json_real(f->d) : json_null();
	case JF_KSTR:
		return jf_str_json(f->s, f->n);
	case JF_KBOOL:
		return json_boolean(f->i);
	case JF_KOBJ:
		return f->obj != NULL ? jf_json(f->obj) : json_null();
	case JF_KINTS:
		return ints_value(f->ints, f->n);
	case JF_KRAW:
		return raw_value(f->s);
	case JF_KNULL:
	case JF_KEND:
	case JF_KSKIP:
	default:
		return json_null();
	}
}

json_t *
jf_json(const struct jf *f)
{
	json_t *o = json_object(), *v;

	for (; o != NULL && f->kind != JF_KEND; f++) {
		if (f->kind == JF_KSKIP)
			continue;
		errno = ENOMEM;
		if ((v = field_value(f)) == NULL ||
		    json_object_set_new(o, f->key, v) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	if (o == NULL)
		errno = ENOMEM;
	return o;
}

char *
jf_dumps(const struct jf *f, size_t *len)
{
	json_t *o = jf_json(f);
	char *s;

	if (o == NULL)
		return NULL;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		errno = ENOMEM;
	else if (len != NULL)
		*len = strlen(s);
	return s;
}

char *
jf_string(const char *s, size_t n)
{
	json_t *j = jf_str_json(s != NULL ? s : "", n);
	char *text = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	json_decref(j);
	if (text == NULL)
		errno = ENOMEM;
	return text;
}

/* --- reading ----------------------------------------------------------------- */

static int read_fields(const json_t *o, struct jf_in *in);

static int
read_str(const json_t *v, struct jf_in *f)
{
	size_t n = json_string_length(v);
	char *s = malloc(n + 1);

	if (s == NULL)
		return -1;
	memcpy(s, json_string_value(v), n);
	s[n] = '\0';
	*(char **)f->dst = s;
	if (f->len != NULL)
		*f->len = n;
	return 0;
}

/* One field: 0 (found set), -1 ENOMEM. */
static int
read_field(const json_t *v, struct jf_in *f)
{
	f->found = v == NULL || json_is_null(v) ? 0 : -1;
	if (f->found == 0)
		return 0;
	switch (f->kind) {
	case JF_KINT:
		if (!json_is_integer(v))
			return 0;
		*(long long *)f->dst = json_integer_value(v);
		break;
	case JF_KREAL:
		if (!json_is_number(v))
			return 0;
		*(double *)f->dst = json_number_value(v);
		break;
	case JF_KSTR:
		if (!json_is_string(v))
			return 0;
		if (read_str(v, f) < 0)
			return -1;
		break;
	case JF_KBOOL:
		if (!json_is_boolean(v))
			return 0;
		*(int *)f->dst = json_is_true(v);
		break;
	case JF_KOBJ:
		if (!json_is_object(v))
			return 0;
		if (read_fields(v, f->sub) < 0)
			return -1;
		break;
	case JF_KEND:
	case JF_KNULL:
	case JF_KINTS:
	case JF_KRAW:
	case JF_KSKIP:
	default:	/* not a kind to read */
		return 0;
	}
	f->found = 1;
	return 0;
}

static int
read_fields(const json_t *o, struct jf_in *in)
{
	for (; in->key != NULL; in++)
		if (read_field(json_object_get(o, in->key), in) < 0)
			return -1;
	return 0;
}

void
jf_in_free(struct jf_in *in)
{
	for (; in != NULL && in->key != NULL; in++) {
		if (in->kind == JF_KSTR && in->found == 1) {
			free(*(char **)in->dst);
			*(char **)in->dst = NULL;
		} else if (in->kind == JF_KOBJ && in->found == 1) {
			jf_in_free(in->sub);
		}
		in->found = 0;
	}
}

static void
clear_found(struct jf_in *in)
{
	for (; in != NULL && in->key != NULL; in++) {
		in->found = 0;
		if (in->kind == JF_KOBJ)
			clear_found(in->sub);
	}
}

int
jf_parse(const char *text, size_t len, struct jf_in *in)
{
	json_t *o = text != NULL ? json_loadb(text, len, 0, NULL) : NULL;
	int rc;

	clear_found(in);
	if (!json_is_object(o)) {
		json_decref(o);
		errno = EINVAL;
		return -1;
	}
	rc = read_fields(o, in);
	json_decref(o);
	if (rc < 0) {
		jf_in_free(in);
		errno = ENOMEM;
	}
	return rc;
}
