/* Backgammon legal plays in C: the same generator as moves.py (``_single_steps``, ``_doubles``,
 * ``_two_dice``) and the same canonical notation as notation.py (``_canonical``), byte for byte.
 *
 * One function, ``plays(board, high, low)``:
 *
 * - ``board``: the mover's own board, 26 signed values (a bytes-like object read as signed chars, or a
 *   sequence of 26 ints): ``board[0]`` checkers off, ``board[1..24]`` the points (the mover's checkers
 *   positive, the opponent's negative), ``board[25]`` the mover's bar;
 * - ``high`` >= ``low``, both 1..6 (equal: a double).
 *
 * Returns a list, sorted by notation as Python sorts strings (stable: ties keep the generator's order),
 * with one ``(notation, steps, after)`` per distinct legal play:
 *
 * - ``notation``: str, exactly ``notation._canonical(steps)``;
 * - ``steps``: bytes, 4 per move in the order played: start (25 = bar), end (0 = off), hit (0/1), die;
 * - ``after``: bytes, the own board after the play, 26 values as signed chars (two's complement).
 *
 * And ``play_objects(board, high, low, white, other_bar, other_off, kinds)``: the same plays as the
 * finished ``moves.Play`` objects (with their ``Position`` and the shared ``Move`` objects), built here:
 * the slots of the two frozen slots-dataclasses are filled through their member descriptors, as their
 * generated ``__init__`` does (it only stores the fields). See native.py.
 *
 * No global mutable state; the search runs without the GIL on a private copy of the board.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define BOARD 26
#define TEXT_MAX 96   /* longest canonical text is well under 64 characters */
#define MAX_STEPS 32  /* single steps of one die: at most 24 moves and one bear-off */
#define TABLE_BITS 12 /* deduplication of two different dice: under 1,300 plays even at 30 a point */

typedef struct {
    signed char start, end, hit, die;
} Step;

typedef struct {
    signed char board[BOARD];
    Step steps[4];
    int count; /* steps used */
    int order; /* the generator's order, for a stable sort */
    int length;
    char text[TEXT_MAX];
} Leaf;

typedef struct {
    Leaf *leaves;
    Py_ssize_t count;
    Py_ssize_t capacity;
    int best; /* doubles: most moves found so far */
    int die;
    int failed; /* out of memory */
} Gen;

/* ------------------------------------------------------------------------------------------------- */
/* Leaves */

static Leaf *
new_leaf(Gen *g)
{
    if (g->count == g->capacity) {
        Py_ssize_t capacity = g->capacity ? g->capacity * 2 : 64;
        if ((size_t)capacity > PY_SSIZE_T_MAX / sizeof(Leaf)) {
            g->failed = 1;
            return NULL;
        }
        Leaf *grown = PyMem_RawRealloc(g->leaves, (size_t)capacity * sizeof(Leaf));
        if (grown == NULL) {
            g->failed = 1;
            return NULL;
        }
        g->leaves = grown;
        g->capacity = capacity;
    }
    return &g->leaves[g->count++];
}

/* ------------------------------------------------------------------------------------------------- */
/* The generator (moves.py) */

/* Every legal move of one checker by ``die`` starting at own point ``top`` or lower (the bar only, if
 * the mover has a checker there). ``outside``: the mover's checkers on 7..25. */
static int
single_steps(const int *b, int die, int outside, int top, Step *out)
{
    int n = 0;
    if (b[25]) {
        int target = b[25 - die];
        if (target >= -1) {
            out[n].start = 25;
            out[n].end = (signed char)(25 - die);
            out[n].hit = target == -1;
            out[n].die = (signed char)die;
            n++;
        }
        return n;
    }
    if (top > 24) {
        top = 24;
    }
    for (int s = top; s > die; s--) {
        if (b[s] > 0) {
            int target = b[s - die];
            if (target >= -1) {
                out[n].start = (signed char)s;
                out[n].end = (signed char)(s - die);
                out[n].hit = target == -1;
                out[n].die = (signed char)die;
                n++;
            }
        }
    }
    if (outside == 0) {
        if (die <= top && b[die] > 0) {
            out[n].start = (signed char)die;
            out[n].end = 0;
            out[n].hit = 0;
            out[n].die = (signed char)die;
            n++;
        }
        else {
            /* The higher-point rule: a die above the highest occupied point bears off from it. */
            for (int s = 6; s > 0; s--) {
                if (b[s] > 0) {
                    if (s < die && s <= top) {
                        out[n].start = (signed char)s;
                        out[n].end = 0;
                        out[n].hit = 0;
                        out[n].die = (signed char)die;
                        n++;
                    }
                    break;
                }
            }
        }
    }
    return n;
}

static void
apply_step(const int *b, const Step *step, int *nb)
{
    memcpy(nb, b, sizeof(int) * BOARD);
    nb[step->start] -= 1;
    if (step->hit) {
        nb[step->end] = 1;
    }
    else {
        nb[step->end] += 1; /* end 0 counts a checker off */
    }
}

static int
outside_count(const int *b)
{
    int n = 0;
    for (int p = 7; p < BOARD; p++) {
        if (b[p] > 0) {
            n += b[p];
        }
    }
    return n;
}

static int
left_after(int outside, const Step *step)
{
    return step->start >= 7 && step->end <= 6 ? outside - 1 : outside;
}

static void
store_board(signed char *out, const int *b)
{
    for (int p = 0; p < BOARD; p++) {
        out[p] = (signed char)b[p];
    }
}

static void
walk(Gen *g, const int *board, int outside, int top, int depth, Step *done)
{
    if (g->failed) {
        return;
    }
    if (depth < 4) {
        Step steps[MAX_STEPS];
        int n = single_steps(board, g->die, outside, top, steps);
        if (n) {
            int next[BOARD];
            for (int i = 0; i < n; i++) {
                apply_step(board, &steps[i], next);
                done[depth] = steps[i];
                walk(g, next, left_after(outside, &steps[i]), steps[i].start, depth + 1, done);
            }
            return;
        }
    }
    if (depth > g->best) {
        g->best = depth;
        g->count = 0;
    }
    if (depth == g->best && depth) {
        Leaf *leaf = new_leaf(g);
        if (leaf == NULL) {
            return;
        }
        store_board(leaf->board, board);
        memcpy(leaf->steps, done, sizeof(Step) * (size_t)depth);
        leaf->count = depth;
    }
}

static uint32_t
hash_board(const int *b)
{
    uint32_t h = 2166136261u;
    for (int p = 0; p < BOARD; p++) {
        h ^= (uint32_t)(b[p] & 0xff);
        h *= 16777619u;
    }
    return h;
}

static int
same_board(const signed char *stored, const int *b)
{
    for (int p = 0; p < BOARD; p++) {
        if (stored[p] != b[p]) {
            return 0;
        }
    }
    return 1;
}

/* Both dice if possible (both orders, the first found per resulting board), else the higher if
 * possible, else the lower. The leaves of ``g`` are the plays of both dice; the singles of each die are
 * gathered apart while no play of both has been found. */
static void
two_dice(Gen *g, const int *b, int high, int low)
{
    int outside = outside_count(b);
    /* Open addressing over the leaves by resulting board: the index of a leaf, or -1. */
    short table[1 << TABLE_BITS];
    const Py_ssize_t table_size = (Py_ssize_t)1 << TABLE_BITS;
    /* singles[0]: the higher die, singles[1]: the lower */
    Leaf singles[2][MAX_STEPS];
    int single_count[2] = {0, 0};

    memset(table, 0xff, sizeof(table)); /* all -1 */
    for (int order = 0; order < 2 && !g->failed; order++) {
        int first = order ? low : high, second = order ? high : low;
        Step steps[MAX_STEPS];
        int n = single_steps(b, first, outside, 25, steps);
        for (int i = 0; i < n && !g->failed; i++) {
            int board[BOARD];
            Step seconds[MAX_STEPS];
            apply_step(b, &steps[i], board);
            int m = single_steps(board, second, left_after(outside, &steps[i]), 25, seconds);
            if (m) {
                for (int j = 0; j < m; j++) {
                    int after[BOARD];
                    apply_step(board, &seconds[j], after);
                    Py_ssize_t slot = (Py_ssize_t)(hash_board(after) & (uint32_t)(table_size - 1));
                    int found = 0;
                    while (table[slot] >= 0) {
                        if (same_board(g->leaves[table[slot]].board, after)) {
                            found = 1;
                            break;
                        }
                        slot = (slot + 1) & (table_size - 1);
                    }
                    if (found) {
                        continue;
                    }
                    if (g->count * 2 >= table_size) {
                        /* Cannot happen with 30 checkers or fewer a side; refuse rather than degrade. */
                        g->failed = 2;
                        break;
                    }
                    Leaf *leaf = new_leaf(g);
                    if (leaf == NULL) {
                        break;
                    }
                    table[slot] = (short)(g->count - 1);
                    store_board(leaf->board, after);
                    leaf->steps[0] = steps[i];
                    leaf->steps[1] = seconds[j];
                    leaf->count = 2;
                }
            }
            else if (g->count == 0) {
                Leaf *list = singles[order];
                int k;
                for (k = 0; k < single_count[order]; k++) {
                    if (same_board(list[k].board, board)) {
                        break;
                    }
                }
                if (k == single_count[order] && k < MAX_STEPS) {
                    store_board(list[k].board, board);
                    list[k].steps[0] = steps[i];
                    list[k].count = 1;
                    single_count[order]++;
                }
            }
        }
    }
    if (g->failed || g->count) {
        return;
    }
    int use = single_count[0] ? 0 : 1;
    for (int k = 0; k < single_count[use]; k++) {
        Leaf *leaf = new_leaf(g);
        if (leaf == NULL) {
            return;
        }
        *leaf = singles[use][k];
    }
}

/* ------------------------------------------------------------------------------------------------- */
/* The notation (notation.py's _canonical) */

typedef struct {
    char *at;
    char *end;
} Out;

static void
put_text(Out *o, const char *text)
{
    while (*text && o->at < o->end) {
        *o->at++ = *text++;
    }
}

static void
put_char(Out *o, char c)
{
    if (o->at < o->end) {
        *o->at++ = c;
    }
}

static void
put_number(Out *o, int n)
{
    if (n >= 10) {
        put_char(o, (char)('0' + n / 10));
    }
    put_char(o, (char)('0' + n % 10));
}

static void
put_point(Out *o, int point)
{
    if (point == 25) {
        put_text(o, "bar");
    }
    else if (point == 0) {
        put_text(o, "off");
    }
    else {
        put_number(o, point);
    }
}

static void
put_single(Out *o, int start, int end, int hit)
{
    put_point(o, start);
    put_char(o, '/');
    put_point(o, end);
    if (hit) {
        put_char(o, '*');
    }
}

typedef struct {
    int start, end, hit;
    int middle[4];
    int middles;
} Path;

/* notation.py's _shape_order: start descending, end descending, the points hit on the way (as a tuple,
 * ascending), the hits first. */
static int
path_before(const Path *a, const Path *b)
{
    if (a->start != b->start) {
        return a->start > b->start ? -1 : 1;
    }
    if (a->end != b->end) {
        return a->end > b->end ? -1 : 1;
    }
    for (int i = 0; i < a->middles && i < b->middles; i++) {
        if (a->middle[i] != b->middle[i]) {
            return a->middle[i] < b->middle[i] ? -1 : 1;
        }
    }
    if (a->middles != b->middles) {
        return a->middles < b->middles ? -1 : 1;
    }
    if (a->hit != b->hit) {
        return a->hit ? -1 : 1;
    }
    return 0;
}

static int
same_shape(const Path *a, const Path *b)
{
    if (a->start != b->start || a->end != b->end || a->middles != b->middles) {
        return 0;
    }
    for (int i = 0; i < a->middles; i++) {
        if (a->middle[i] != b->middle[i]) {
            return 0;
        }
    }
    return 1;
}

static void
put_path(Out *o, const Path *p, int hit)
{
    if (p->middles) {
        put_point(o, p->start);
        for (int i = 0; i < p->middles; i++) {
            put_char(o, '/');
            put_number(o, p->middle[i]);
            put_char(o, '*');
        }
        put_char(o, '/');
        put_point(o, p->end);
        if (hit) {
            put_char(o, '*');
        }
    }
    else {
        put_single(o, p->start, p->end, hit);
    }
}

/* The notation of ``count`` steps in the generator's order; returns its length. */
static int
canonical(const Step *steps, int count, char *text)
{
    Out o = {text, text + TEXT_MAX};
    if (count == 1) {
        put_single(&o, steps[0].start, steps[0].end, steps[0].hit);
        return (int)(o.at - text);
    }
    if (count == 2) {
        Step first = steps[0], second = steps[1];
        if (first.start < second.start || (first.start == second.start && first.end < second.end)) {
            Step swap = first;
            first = second;
            second = swap;
        }
        if (first.end == second.start) { /* one checker's path */
            if (first.hit) {
                put_point(&o, first.start);
                put_char(&o, '/');
                put_number(&o, first.end);
                put_text(&o, "*/");
                put_point(&o, second.end);
                if (second.hit) {
                    put_char(&o, '*');
                }
            }
            else {
                put_single(&o, first.start, second.end, second.hit);
            }
        }
        else if (first.start == second.start && first.end == second.end) {
            put_single(&o, first.start, first.end, first.hit || second.hit);
            put_text(&o, "(2)");
        }
        else {
            put_single(&o, first.start, first.end, first.hit);
            put_char(&o, ' ');
            put_single(&o, second.start, second.end, second.hit);
        }
        return (int)(o.at - text);
    }
    /* Chain the steps into paths. */
    Path paths[4];
    int n = 0;
    for (int i = 0; i < count; i++) {
        int k;
        for (k = 0; k < n; k++) {
            if (paths[k].end == steps[i].start) {
                if (paths[k].hit) {
                    paths[k].middle[paths[k].middles++] = steps[i].start;
                }
                paths[k].end = steps[i].end;
                paths[k].hit = steps[i].hit;
                break;
            }
        }
        if (k == n) {
            paths[n].start = steps[i].start;
            paths[n].end = steps[i].end;
            paths[n].hit = steps[i].hit;
            paths[n].middles = 0;
            n++;
        }
    }
    if (n == 1 && !paths[0].middles) {
        put_single(&o, paths[0].start, paths[0].end, paths[0].hit);
        return (int)(o.at - text);
    }
    /* A stable insertion sort (at most four paths). */
    for (int i = 1; i < n; i++) {
        Path moving = paths[i];
        int j = i;
        while (j > 0 && path_before(&moving, &paths[j - 1]) < 0) {
            paths[j] = paths[j - 1];
            j--;
        }
        paths[j] = moving;
    }
    int index = 0;
    while (index < n) {
        int repeat = 1;
        int hit = paths[index].hit;
        while (index + repeat < n && same_shape(&paths[index], &paths[index + repeat])) {
            hit = hit || paths[index + repeat].hit;
            repeat++;
        }
        if (index) {
            put_char(&o, ' ');
        }
        put_path(&o, &paths[index], hit);
        if (repeat > 1) {
            put_char(&o, '(');
            put_number(&o, repeat);
            put_char(&o, ')');
        }
        index += repeat;
    }
    return (int)(o.at - text);
}

/* ------------------------------------------------------------------------------------------------- */
/* Sorting by notation (Python's order of ASCII strings; ties keep the generator's order) */

static int
leaf_before(const Leaf *a, const Leaf *b)
{
    int shorter = a->length < b->length ? a->length : b->length;
    int c = memcmp(a->text, b->text, (size_t)shorter);
    if (c) {
        return c;
    }
    if (a->length != b->length) {
        return a->length < b->length ? -1 : 1;
    }
    return a->order < b->order ? -1 : (a->order > b->order);
}

static int
compare_leaves(const void *a, const void *b)
{
    return leaf_before(*(Leaf *const *)a, *(Leaf *const *)b);
}

/* ------------------------------------------------------------------------------------------------- */
/* The Python function */

static int
read_board(PyObject *arg, int *b)
{
    if (PyObject_CheckBuffer(arg)) {
        Py_buffer view;
        if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        if (view.len != BOARD) {
            PyBuffer_Release(&view);
            PyErr_Format(PyExc_ValueError, "board must have 26 values, not %zd", view.len);
            return -1;
        }
        const signed char *data = view.buf;
        for (int p = 0; p < BOARD; p++) {
            b[p] = data[p];
        }
        PyBuffer_Release(&view);
    }
    else {
        PyObject *seq = PySequence_Fast(arg, "board must be bytes or a sequence of 26 ints");
        if (seq == NULL) {
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n != BOARD) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "board must have 26 values, not %zd", n);
            return -1;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (int p = 0; p < BOARD; p++) {
            long value = PyLong_AsLong(items[p]);
            if (value == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            if (value < -100 || value > 100) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "board value %ld out of range", value);
                return -1;
            }
            b[p] = (int)value;
        }
        Py_DECREF(seq);
    }
    for (int p = 1; p < 25; p++) {
        if (b[p] < -30 || b[p] > 30) {
            PyErr_Format(PyExc_ValueError, "at most 30 checkers on a point, not %d on %d", b[p], p);
            return -1;
        }
    }
    if (b[0] < 0 || b[0] > 30 || b[25] < 0 || b[25] > 30) {
        PyErr_SetString(PyExc_ValueError, "off and bar must be 0..30");
        return -1;
    }
    return 0;
}

static PyObject *
ascii_string(const char *text, int length)
{
    PyObject *s = PyUnicode_New(length, 127);
    if (s == NULL) {
        return NULL;
    }
    memcpy(PyUnicode_1BYTE_DATA(s), text, (size_t)length);
    return s;
}

static PyObject *
make_entry(const Leaf *leaf)
{
    char steps[16];
    PyObject *entry = PyTuple_New(3);
    if (entry == NULL) {
        return NULL;
    }
    PyObject *text = ascii_string(leaf->text, leaf->length);
    if (text == NULL) {
        Py_DECREF(entry);
        return NULL;
    }
    PyTuple_SET_ITEM(entry, 0, text);
    for (int i = 0; i < leaf->count; i++) {
        steps[4 * i] = (char)leaf->steps[i].start;
        steps[4 * i + 1] = (char)leaf->steps[i].end;
        steps[4 * i + 2] = (char)leaf->steps[i].hit;
        steps[4 * i + 3] = (char)leaf->steps[i].die;
    }
    PyObject *moves = PyBytes_FromStringAndSize(steps, 4 * (Py_ssize_t)leaf->count);
    if (moves == NULL) {
        Py_DECREF(entry);
        return NULL;
    }
    PyTuple_SET_ITEM(entry, 1, moves);
    PyObject *after = PyBytes_FromStringAndSize((const char *)leaf->board, BOARD);
    if (after == NULL) {
        Py_DECREF(entry);
        return NULL;
    }
    PyTuple_SET_ITEM(entry, 2, after);
    /* Only atomic items: untracked, as the collector itself would at its first pass (_PyTuple_MaybeUntrack),
     * so that hundreds of new plays do not trigger collections that traverse them. */
    PyObject_GC_UnTrack(entry);
    return entry;
}

/* Reads (board, high, low) from args, then searches, writes the notations and sorts without the GIL.
 * On success returns 0 with ``*sorted`` the ``g->count`` leaves in order; the caller frees
 * ``g->leaves`` and ``*sorted`` (PyMem_RawFree) in every case. On failure returns -1 with an error set. */
static int
search(PyObject *const *args, Gen *g, Leaf ***sorted)
{
    int b[BOARD];
    *sorted = NULL;
    if (read_board(args[0], b) < 0) {
        return -1;
    }
    long high = PyLong_AsLong(args[1]);
    if (high == -1 && PyErr_Occurred()) {
        return -1;
    }
    long low = PyLong_AsLong(args[2]);
    if (low == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (low < 1 || high > 6 || low > high) {
        PyErr_Format(PyExc_ValueError, "dice must be 6 >= high >= low >= 1, not %ld, %ld", high, low);
        return -1;
    }
    g->die = (int)high;
    Leaf **order = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (high == low) {
        Step done[4];
        walk(g, b, outside_count(b), 25, 0, done);
    }
    else {
        two_dice(g, b, (int)high, (int)low);
    }
    if (!g->failed && g->count) {
        order = PyMem_RawMalloc(sizeof(Leaf *) * (size_t)g->count);
        if (order == NULL) {
            g->failed = 1;
        }
        else {
            for (Py_ssize_t i = 0; i < g->count; i++) {
                Leaf *leaf = &g->leaves[i];
                leaf->order = (int)i;
                leaf->length = canonical(leaf->steps, leaf->count, leaf->text);
                order[i] = leaf;
            }
            qsort(order, (size_t)g->count, sizeof(Leaf *), compare_leaves);
        }
    }
    Py_END_ALLOW_THREADS
    *sorted = order;
    if (g->failed == 2) {
        PyErr_SetString(PyExc_ValueError, "too many plays: not a backgammon position");
        return -1;
    }
    if (g->failed) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *
plays(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "plays() takes 3 arguments (board, high, low), %zd given", nargs);
        return NULL;
    }
    Gen g = {NULL, 0, 0, 0, 0, 0};
    Leaf **sorted = NULL;
    PyObject *result = NULL;
    if (search(args, &g, &sorted) < 0) {
        goto done;
    }
    result = PyList_New(g.count);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < g.count; i++) {
        PyObject *entry = make_entry(sorted[i]);
        if (entry == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, entry);
    }
done:
    PyMem_RawFree(sorted);
    PyMem_RawFree(g.leaves);
    return result;
}

/* ------------------------------------------------------------------------------------------------- */
/* play_objects: the finished Play objects (moves.py's Play, Move and Position), built in C */

#define MOVE_TABLE (26 * 26 * 2)
#define SMALL 40 /* ints -SMALL..SMALL made once per call */

typedef struct {
    PyTypeObject *play, *position;
    PyObject *play_slots[4];     /* moves, notation, result, dice_used */
    PyObject *position_slots[3]; /* points, bar, off */
    PyObject *table;             /* a tuple: the Move of (start, end, hit) at (start * 26 + end) * 2 + hit */
    PyObject *small[2 * SMALL + 1];
} Kinds;

static void
clear_kinds(Kinds *k)
{
    for (int i = 0; i < 4; i++) {
        Py_CLEAR(k->play_slots[i]);
    }
    for (int i = 0; i < 3; i++) {
        Py_CLEAR(k->position_slots[i]);
    }
    for (int i = 0; i < 2 * SMALL + 1; i++) {
        Py_CLEAR(k->small[i]);
    }
}

static int
get_slots(PyTypeObject *type, const char *const *names, int n, PyObject **out)
{
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descr == NULL) {
            return -1;
        }
        out[i] = descr;
        if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

static int
read_kinds(PyObject *arg, Kinds *k)
{
    static const char *const play_names[] = {"moves", "notation", "result", "dice_used"};
    static const char *const position_names[] = {"points", "bar", "off"};
    memset(k, 0, sizeof(*k));
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 3) {
        PyErr_SetString(PyExc_TypeError, "kinds must be (Play, Position, move table)");
        return -1;
    }
    PyObject *play = PyTuple_GET_ITEM(arg, 0), *position = PyTuple_GET_ITEM(arg, 1);
    PyObject *table = PyTuple_GET_ITEM(arg, 2);
    if (!PyType_Check(play) || !PyType_Check(position)) {
        PyErr_SetString(PyExc_TypeError, "kinds must start with the Play and Position classes");
        return -1;
    }
    if (!PyTuple_Check(table) || PyTuple_GET_SIZE(table) != MOVE_TABLE) {
        PyErr_Format(PyExc_TypeError, "the move table must be a tuple of %d", MOVE_TABLE);
        return -1;
    }
    k->play = (PyTypeObject *)play;
    k->position = (PyTypeObject *)position;
    k->table = table;
    if (get_slots(k->play, play_names, 4, k->play_slots) < 0 ||
        get_slots(k->position, position_names, 3, k->position_slots) < 0) {
        return -1;
    }
    for (int i = 0; i < 2 * SMALL + 1; i++) {
        k->small[i] = PyLong_FromLong(i - SMALL);
        if (k->small[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
number(Kinds *k, long value)
{
    if (value >= -SMALL && value <= SMALL) {
        PyObject *n = k->small[value + SMALL];
        Py_INCREF(n);
        return n;
    }
    return PyLong_FromLong(value);
}

static PyObject *
pair(Kinds *k, long first, long second)
{
    PyObject *a = number(k, first);
    if (a == NULL) {
        return NULL;
    }
    PyObject *b = number(k, second);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *t = PyTuple_New(2);
    if (t == NULL) {
        Py_DECREF(a);
        Py_DECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    PyObject_GC_UnTrack(t); /* ints only (see make_entry) */
    return t;
}

/* A new instance of a slots class, without calling __init__, its slots set from ``values`` (stolen,
 * each may be NULL after an earlier failure: then the instance is not made). */
static PyObject *
instance(PyTypeObject *type, PyObject **slots, PyObject **values, int n)
{
    PyObject *obj = NULL;
    for (int i = 0; i < n; i++) {
        if (values[i] == NULL) {
            goto fail;
        }
    }
    obj = type->tp_alloc(type, 0);
    if (obj == NULL) {
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        if (Py_TYPE(slots[i])->tp_descr_set(slots[i], obj, values[i]) < 0) {
            Py_CLEAR(obj);
            goto fail;
        }
    }
fail:
    for (int i = 0; i < n; i++) {
        Py_XDECREF(values[i]);
    }
    return obj;
}

static PyObject *
make_play(Kinds *k, const Leaf *leaf, int white, long other_bar, long other_off)
{
    const signed char *b = leaf->board;
    int hits = 0;
    PyObject *moves = PyTuple_New(leaf->count);
    PyObject *used = PyTuple_New(leaf->count);
    if (moves != NULL && used != NULL) {
        for (int i = 0; i < leaf->count; i++) {
            const Step *s = &leaf->steps[i];
            PyObject *move = PyTuple_GET_ITEM(k->table, (s->start * 26 + s->end) * 2 + s->hit);
            Py_INCREF(move);
            PyTuple_SET_ITEM(moves, i, move);
            PyTuple_SET_ITEM(used, i, number(k, s->die));
            hits += s->hit;
        }
        PyObject_GC_UnTrack(used); /* ints only (see make_entry) */
    }
    PyObject *points = PyTuple_New(25);
    if (points != NULL) {
        PyTuple_SET_ITEM(points, 0, number(k, 0));
        for (int p = 1; p < 25; p++) {
            PyTuple_SET_ITEM(points, p, number(k, white ? b[25 - p] : -b[p]));
        }
        PyObject_GC_UnTrack(points); /* ints only (see make_entry) */
    }
    PyObject *fields[3] = {
        points,
        white ? pair(k, b[25], other_bar + hits) : pair(k, other_bar + hits, b[25]),
        white ? pair(k, b[0], other_off) : pair(k, other_off, b[0]),
    };
    PyObject *result = instance(k->position, k->position_slots, fields, 3);
    PyObject *values[4] = {moves, ascii_string(leaf->text, leaf->length), result, used};
    return instance(k->play, k->play_slots, values, 4);
}

static PyObject *
play_objects(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError,
                     "play_objects() takes 7 arguments (board, high, low, white, other_bar, other_off, "
                     "kinds), %zd given",
                     nargs);
        return NULL;
    }
    int white = PyObject_IsTrue(args[3]);
    if (white < 0) {
        return NULL;
    }
    long other_bar = PyLong_AsLong(args[4]);
    if (other_bar == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long other_off = PyLong_AsLong(args[5]);
    if (other_off == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (other_bar < 0 || other_bar > 30 || other_off < 0 || other_off > 30) {
        PyErr_SetString(PyExc_ValueError, "the opponent's bar and off must be 0..30");
        return NULL;
    }
    Kinds k;
    if (read_kinds(args[6], &k) < 0) {
        clear_kinds(&k);
        return NULL;
    }
    Gen g = {NULL, 0, 0, 0, 0, 0};
    Leaf **sorted = NULL;
    PyObject *result = NULL;
    if (search(args, &g, &sorted) < 0) {
        goto done;
    }
    result = PyTuple_New(g.count);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < g.count; i++) {
        PyObject *play = make_play(&k, sorted[i], white, other_bar, other_off);
        if (play == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, play);
    }
done:
    PyMem_RawFree(sorted);
    PyMem_RawFree(g.leaves);
    clear_kinds(&k);
    return result;
}

static PyMethodDef methods[] = {
    {"plays", (PyCFunction)(void (*)(void))plays, METH_FASTCALL,
     "plays(board, high, low) -> list[tuple[str, bytes, bytes]]\n\n"
     "Every distinct legal play of the roll (high >= low) from the mover's own board (26 signed\n"
     "values: off, points 1..24, bar), sorted by notation: (notation, steps, after), steps 4 bytes a\n"
     "move (start, end, hit, die) in the order played, after the own board after the play (signed)."},
    {"play_objects", (PyCFunction)(void (*)(void))play_objects, METH_FASTCALL,
     "play_objects(board, high, low, white, other_bar, other_off, kinds) -> tuple[Play, ...]\n\n"
     "The same plays as finished objects: kinds = (Play, Position, move table), the classes (slots\n"
     "classes, filled without calling __init__) and a tuple of 1,352 Moves, the Move (start, end, hit)\n"
     "at (start * 26 + end) * 2 + hit; white: the mover is White (the result's orientation);\n"
     "other_bar, other_off: the opponent's checkers on the bar and off before the play."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_native",
    "Backgammon legal plays in C (see libs/engines/backgammon/native.py).",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&module_def);
}
