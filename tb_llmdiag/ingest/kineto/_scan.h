/* Shared between the parts of the _scan extension: the depth scan's machine (_scan.c), used by split and by the
 * read-ahead thread (_readahead.c). */
#ifndef LLMDIAG_SCAN_H
#define LLMDIAG_SCAN_H
#include <Python.h>

typedef struct {
    Py_ssize_t depth;     /* open brackets outside strings; 1 just inside the events array */
    Py_ssize_t max_depth; /* deeper than this stops the scan */
    int in_string, escape;
} SplitMachine;

typedef struct {
    Py_ssize_t last_comma, close, deep; /* positions, -1 if none (see split in _scan.c) */
} SplitFound;

void split_scan(const unsigned char *b, Py_ssize_t start, Py_ssize_t end, SplitMachine *m, SplitFound *f);

#endif
