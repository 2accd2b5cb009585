/*
 * price.h - what model tokens cost: a small built-in table of per-model
 * prices (USD per million tokens: input, cached input, output) that the
 * operator overrides with --price IN,CACHED,OUT, and the cost of a usage.
 *
 * Cached tokens are part of the input tokens (responses-api.md: usage),
 * and reasoning tokens part of the output tokens: they are billed as such.
 */
#ifndef AGENTZ_PRICE_H
#define AGENTZ_PRICE_H

#include <stddef.h>

/* USD per 1,000,000 tokens. */
struct price {
	double input;
	double cached;		/* cached input tokens */
	double output;
};

/*
 * Parses "IN,CACHED,OUT" (three plain decimal numbers >= 0, each at most
 * 1,000,000) into p. 0, or -1 with p unchanged on any other text.
 */
int price_parse(const char *s, struct price *p);

/*
 * The built-in price of model: its exact name, or the name followed by a
 * dated snapshot suffix ("gpt-4o-2024-08-06"). 0 and *p set, or -1 when
 * the table has no price for it.
 */
int price_lookup(const char *model, struct price *p);

/*
 * USD for input tokens (cached of them were cached) and output tokens.
 * Counts below 0 count as 0; cached is capped at input.
 */
double price_cost(const struct price *p, long long input, long long cached,
    long long output);

/*
 * Writes usd as "$12.34" (4 decimals below $1, so small runs show
 * something) into buf of size n; returns buf.
 */
char *price_format(double usd, char *buf, size_t n);

#endif
