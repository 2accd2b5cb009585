/*
 * delta.h - reads a streamed-string event of the Responses API (a *.delta
 * event, or the *.done twin carrying the full value) without building a
 * tree: most of a long stream is such events of a few bytes each, and
 * jansson's per-byte callback and per-value allocation cost far more than
 * the bytes warrant (~5 us an event).
 *
 * The event must be one flat JSON object; the fields below are read in
 * place (string bodies still escaped), every other value is only checked
 * with jspan.h's scanner. Whenever delta_scan() succeeds, json_loadb()
 * would have succeeded with the same values; it gives up (-1, the caller
 * then parses with jansson) on anything rare: escapes in keys, a repeated
 * field of the list, an index that is neither null nor an integer of at
 * most 18 digits, a "type" or "item_id" that is not a plain string, and a
 * "type" the caller does not want.
 */
#ifndef AGENTZ_DELTA_H
#define AGENTZ_DELTA_H

#include <stddef.h>

#include "supervisor/model/jspan.h"

enum delta_field {
	DELTA_TYPE,
	DELTA_ITEM_ID,
	DELTA_OUTPUT_INDEX,
	DELTA_CONTENT_INDEX,
	DELTA_SUMMARY_INDEX,
	DELTA_DELTA,		/* from here on: streamed string fields */
	DELTA_TEXT,
	DELTA_REFUSAL,
	DELTA_ARGUMENTS,
	DELTA_INPUT,
	DELTA_CODE,
	DELTA_DIFF,
	DELTA_NFIELDS,
};

/* What delta_scan() found. A field is valid once its bit is in seen. */
struct delta_event {
	unsigned seen;			/* bit per enum delta_field */
	unsigned null;			/* an index field that was null */
	struct jspan str[DELTA_NFIELDS];	/* string bodies */
	int esc[DELTA_NFIELDS];		/* the body has escapes */
	long long num[DELTA_NFIELDS];	/* index values */
};

/* Asked with the "type" as soon as it is read: non-zero to go on. */
typedef int delta_type_fn(const char *type, size_t n, void *arg);

/*
 * Scans data[0..len) as one event. 0 with ev filled, or -1 to leave the
 * event to jansson. want is called once, with the "type" (none: -1).
 */
int delta_scan(const char *data, size_t len, delta_type_fn *want, void *arg,
    struct delta_event *ev);

/* The field called name, or DELTA_NFIELDS. */
enum delta_field delta_field_named(const char *name, size_t n);

#endif
