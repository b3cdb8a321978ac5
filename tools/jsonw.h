/*
 * jsonw.h - the little JSON the tools print: strings escaped per RFC 8259
 * (quote, backslash, control characters; bytes that are not UTF-8 become
 * U+FFFD so the output is always valid), and values that are written as
 * numbers when their text already is a JSON number (so a 64-bit counter
 * keeps every digit) and as strings otherwise.
 */
#ifndef RINGFEED_TOOLS_JSONW_H
#define RINGFEED_TOOLS_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Writes s[0..len) escaped for the inside of a JSON string (no quotes). */
void json_escape(FILE *f, const char *s, size_t len);

/* Writes s[0..len) as a JSON string, quotes included. */
void json_string(FILE *f, const char *s, size_t len);

/* Same for a NUL-terminated string. */
void json_str(FILE *f, const char *s);

/* True when s[0..len) is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
bool json_is_number(const char *s, size_t len);

/* Writes s[0..len) as a number when json_is_number, else as a string. */
void json_value(FILE *f, const char *s, size_t len);

/* Writes a finite double (shortest round-trip text), or null. */
void json_double(FILE *f, double v);

#endif
