/*
 * jsonf_tree.h - typed fields (jsonf.h) as a jansson value, for the
 * modules that own a JSON format and take fields from the others (the
 * journal's records, cells/record_json.c). Only those include it: no
 * other header names a jansson type.
 */
#ifndef AGENTZ_JSONF_TREE_H
#define AGENTZ_JSONF_TREE_H

#include "supervisor/text/jsonf.h"

/* The object of fields f as a new value; NULL with errno as jf_dumps. */
struct json_t;
struct json_t *jf_json(const struct jf *f);
/* Any bytes (n of them; (size_t)-1: strlen) as a JSON string, invalid
 * UTF-8 replaced; null for NULL. NULL when out of memory. */
struct json_t *jf_str_json(const char *s, size_t n);

#endif
