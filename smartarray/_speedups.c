/* smartarray._speedups: SmartArray's indexing fast paths as C slots.
 *
 * A class defined in Python pays CPython's price for a Python-level __getitem__ or
 * __setitem__ (a frame, and about sixty machine instructions per bytecode) on every
 * ``x[1:5]``, ``x[3]`` and ``x[3] = 1.0``: more than numpy's whole indexing takes. This
 * module gives SmartArray a base class, ``Indexing``, whose mapping slots run the same fast
 * paths as the Python methods ``SmartArray._getitem_py`` and ``SmartArray._setitem_py``
 * (smartarray/_array.py, the reference: every condition here is one there), and call the
 * Python code for everything else. It also holds the twelve attributes these paths read and
 * a view is made of (``_shape``, ``_strides``, ``_host_1d``...: FIELDS below) as slots, which
 * C reads and writes directly and Python reads as fast as instance attributes (a member
 * descriptor, as ``__slots__`` makes; the Python base of SmartArray without this module has
 * the same ``__slots__``). The fast paths:
 *
 * - ``x[a:b]`` of a 1-d array, step 1, within bounds: a view made here (same attributes,
 *   stored in the same order);
 * - ``x[i]`` of a 1-d array whose host copy is ready: numpy's own element read;
 * - ``x[i] = v`` (a Python float or int) of a writable contiguous 1-d numeric array while
 *   its allocation holds a host token: the lock-free write and its token check.
 *
 * The GIL is held throughout, and no Python code runs between the reads of one fast path
 * (plain instance attributes), except where the Python method also makes a call (the
 * ``_alloc`` property, numpy's item read and write). The module is optional: without a C
 * compiler the package installs without it and SmartArray uses the Python methods
 * (``SMARTARRAY_PURE_PYTHON=1`` does too).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>

/* The slots, in the order SmartArray's Python code stores a view's (FIELDS in _array.py). */
typedef struct {
    PyObject_HEAD
    PyObject *alloc_if_made;
    PyObject *own_host;
    PyObject *offset;
    PyObject *shape;
    PyObject *strides;
    PyObject *dtype;
    PyObject *writeable;
    PyObject *base;
    PyObject *host_ro;
    PyObject *host_rw;
    PyObject *host_scalar;
    PyObject *host_1d;
} Indexing;

#define FIELD(name, field) {name, T_OBJECT_EX, offsetof(Indexing, field), 0, NULL}
static PyMemberDef indexing_members[] = {
    FIELD("_alloc_if_made", alloc_if_made),
    FIELD("_own_host", own_host),
    FIELD("_offset", offset),
    FIELD("_shape", shape),
    FIELD("_strides", strides),
    FIELD("_dtype", dtype),
    FIELD("_writeable", writeable),
    FIELD("_base", base),
    FIELD("_host_ro", host_ro),
    FIELD("_host_rw", host_rw),
    FIELD("_host_scalar", host_scalar),
    FIELD("_host_1d", host_1d),
    {NULL, 0, 0, 0, NULL},
};

/* Set by configure(): the SmartArray class, State.HOST and State.BOTH. */
static PyTypeObject *smartarray_class = NULL;
static PyObject *state_host = NULL;
static PyObject *state_both = NULL;
static PyObject *empty_tuple = NULL;

/* Interned names: attributes of an Allocation, SmartArray's methods, and ``_alloc``. */
static PyObject *s_alloc, *s_host_token, *s_state, *s_host_event, *s_device_event, *s_index,
    *s_assign, *s_setitem_py;

/* The fast paths of ``self[key]`` return 1 with the result in ``*out`` (a new reference),
 * 0 where they do not apply (the Python method takes over), -1 on an error. */

/* A slot's value as Python reads it: a new reference, or NULL with AttributeError. */
static PyObject *
field(PyObject *self, PyObject *value, const char *name)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%s'",
                     Py_TYPE(self)->tp_name, name);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

/* ``self[key]``, key a slice: a view of a 1-d array, step 1, within bounds. The layout
 * (shape, strides) is read once, as the Python method reads it into locals. */
static int
slice_view(Indexing *self, PyObject *key, PyObject **out)
{
    PySliceObject *slice = (PySliceObject *)key;
    PyObject *shape = self->shape, *strides = self->strides;
    PyObject *alloc, *offset, *new_shape, *length;
    Indexing *view;
    Py_ssize_t size, start, stop, stride, old_offset;
    int status = 0;

    if (shape == NULL || strides == NULL || !PyTuple_CheckExact(shape)
        || PyTuple_GET_SIZE(shape) != 1 || !PyTuple_CheckExact(strides)
        || PyTuple_GET_SIZE(strides) != 1 || slice->step != Py_None)
        return 0;
    size = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
    if (size == -1 && PyErr_Occurred())
        return -1;
    if (slice->start == Py_None)
        start = 0;
    else if (PyLong_CheckExact(slice->start)) {
        start = PyLong_AsSsize_t(slice->start);
        if (start == -1 && PyErr_Occurred()) { /* (past a Py_ssize_t: the general path) */
            PyErr_Clear();
            return 0;
        }
    }
    else
        return 0;
    if (slice->stop == Py_None)
        stop = size;
    else if (PyLong_CheckExact(slice->stop)) {
        stop = PyLong_AsSsize_t(slice->stop);
        if (stop == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else
        return 0;
    if (!(start >= 0 && start < stop && stop <= size))
        return 0;
    stride = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, 0));
    if (stride == -1 && PyErr_Occurred())
        return -1;

    Py_INCREF(shape); /* (held: making the allocation below runs Python code) */
    Py_INCREF(strides);
    alloc = self->alloc_if_made;
    if (alloc != NULL && alloc != Py_None)
        Py_INCREF(alloc);
    else {
        /* (made now: it is shared with the view; the layout read above is used, as the
         * Python method uses its locals) */
        alloc = PyObject_GetAttr((PyObject *)self, s_alloc);
        if (alloc == NULL) {
            status = -1;
            goto done;
        }
    }
    if (self->offset == NULL || self->dtype == NULL || self->writeable == NULL
        || self->base == NULL) {
        Py_DECREF(alloc); /* (never so on an array that was made: the general path) */
        goto done;
    }
    old_offset = PyLong_AsSsize_t(self->offset);
    if (old_offset == -1 && PyErr_Occurred()) {
        Py_DECREF(alloc);
        status = -1;
        goto done;
    }
    offset = PyLong_FromSsize_t(old_offset + start * stride);
    length = PyLong_FromSsize_t(stop - start);
    new_shape = PyTuple_New(1);
    view = (Indexing *)PyBaseObject_Type.tp_new(smartarray_class, empty_tuple, NULL);
    if (offset == NULL || length == NULL || new_shape == NULL || view == NULL) {
        Py_DECREF(alloc);
        Py_XDECREF(offset);
        Py_XDECREF(length);
        Py_XDECREF(new_shape);
        Py_XDECREF(view);
        status = -1;
        goto done;
    }
    PyTuple_SET_ITEM(new_shape, 0, length);
    /* (a new object: every slot is NULL; the references are moved or taken) */
    view->alloc_if_made = alloc;
    view->offset = offset;
    view->shape = new_shape;
    Py_INCREF(strides);
    view->strides = strides;
    Py_INCREF(self->dtype);
    view->dtype = self->dtype;
    Py_INCREF(self->writeable);
    view->writeable = self->writeable;
    /* like numpy: the memory's owner */
    view->base = self->base == Py_None ? (PyObject *)self : self->base;
    Py_INCREF(view->base);
    Py_INCREF(Py_None);
    view->host_ro = Py_None;
    Py_INCREF(Py_None);
    view->host_rw = Py_None;
    Py_INCREF(Py_None);
    view->host_scalar = Py_None;
    Py_INCREF(Py_None);
    view->host_1d = Py_None;
    *out = (PyObject *)view;
    status = 1;
done:
    Py_DECREF(shape);
    Py_DECREF(strides);
    return status;
}

/* ``self[key]``, key an int: the element of a 1-d array whose host copy is ready. */
static int
element(Indexing *self, PyObject *key, PyObject **out)
{
    PyObject *host = self->host_1d, *alloc;
    PyObject *value = NULL, *state = NULL;
    int ready = 0;

    if (host == NULL || host == Py_None)
        return 0;
    alloc = field((PyObject *)self, self->alloc_if_made, "_alloc_if_made");
    if (alloc == NULL)
        return -1;
    Py_INCREF(host); /* (held: the reads below may run code that drops the slot's) */
    if (alloc == Py_None) {
        /* (no allocation yet: see _own_host) */
        value = field((PyObject *)self, self->own_host, "_own_host");
        if (value == NULL)
            goto error;
        ready = value != Py_None;
    }
    else {
        value = PyObject_GetAttr(alloc, s_host_token);
        if (value == NULL)
            goto error;
        if (value != Py_None) /* (state HOST, nothing pending) */
            ready = 1;
        else {
            Py_CLEAR(value);
            state = PyObject_GetAttr(alloc, s_state);
            if (state == NULL)
                goto error;
            value = PyObject_GetAttr(alloc, s_host_event);
            if (value == NULL)
                goto error;
            if (value == Py_None) {
                /* (device work to wait for matters in state BOTH only: mapped memory) */
                if (state == state_host)
                    ready = 1;
                else if (state == state_both) {
                    Py_CLEAR(value);
                    value = PyObject_GetAttr(alloc, s_device_event);
                    if (value == NULL)
                        goto error;
                    ready = value == Py_None;
                }
            }
        }
    }
    Py_XDECREF(value);
    Py_XDECREF(state);
    Py_DECREF(alloc);
    if (ready) {
        *out = PyObject_GetItem(host, key); /* numpy's own IndexError for a bad index */
        Py_DECREF(host);
        return *out == NULL ? -1 : 1;
    }
    Py_DECREF(host);
    return 0;
error:
    Py_XDECREF(value);
    Py_XDECREF(state);
    Py_DECREF(alloc);
    Py_DECREF(host);
    return -1;
}

static int
check_configured(void)
{
    if (smartarray_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "smartarray._speedups is not configured");
        return -1;
    }
    return 0;
}

static PyObject *
indexing_subscript(PyObject *self, PyObject *key)
{
    PyTypeObject *kind = Py_TYPE(key);
    PyObject *result = NULL;
    int status = 0;

    if (check_configured() < 0)
        return NULL;
    if (kind == &PySlice_Type)
        status = slice_view((Indexing *)self, key, &result);
    else if (kind == &PyLong_Type)
        status = element((Indexing *)self, key, &result);
    if (status != 0)
        return result; /* (NULL on an error) */
    return PyObject_CallMethodObjArgs(self, s_index, key, (PyObject *)kind, NULL);
}

/* ``self[key] = value``: the lock-free element write, else the Python method. */
static int
indexing_ass_subscript(PyObject *op, PyObject *key, PyObject *value)
{
    Indexing *self = (Indexing *)op;
    PyObject *host = self->host_scalar, *alloc = NULL, *token = NULL, *again = NULL;
    PyObject *result;
    int status = -1;

    if (value == NULL) {
        PyErr_SetString(PyExc_ValueError, "cannot delete array elements");
        return -1;
    }
    if (check_configured() < 0)
        return -1;
    if (host == NULL || host == Py_None || !PyLong_CheckExact(key)
        || !(PyFloat_CheckExact(value) || PyLong_CheckExact(value))) {
        /* (the other lock-free write and the general path: the Python method, whole) */
        result = PyObject_CallMethodObjArgs(op, s_setitem_py, key, value, NULL);
        if (result == NULL)
            return -1;
        Py_DECREF(result);
        return 0;
    }
    Py_INCREF(host);
    alloc = field(op, self->alloc_if_made, "_alloc_if_made"); /* (set wherever _host_rw is) */
    if (alloc == NULL)
        goto done;
    token = PyObject_GetAttr(alloc, s_host_token);
    if (token == NULL)
        goto done;
    if (token != Py_None) {
        if (PyObject_SetItem(host, key, value) < 0) {
            /* A memoryview's errors are not numpy's: nothing was written, and _assign
             * raises numpy's. */
            if (!(PyErr_ExceptionMatches(PyExc_IndexError)
                  || PyErr_ExceptionMatches(PyExc_ValueError)
                  || PyErr_ExceptionMatches(PyExc_OverflowError)))
                goto done;
            PyErr_Clear();
        }
        else {
            again = PyObject_GetAttr(alloc, s_host_token);
            if (again == NULL)
                goto done;
            if (again == token) {
                status = 0;
                goto done;
            }
        }
    }
    result = PyObject_CallMethodObjArgs(op, s_assign, key, value, NULL);
    if (result != NULL) {
        Py_DECREF(result);
        status = 0;
    }
done:
    Py_DECREF(host);
    Py_XDECREF(alloc);
    Py_XDECREF(token);
    Py_XDECREF(again);
    return status;
}

/* Slot ``member`` of ``op`` (an entry of indexing_members), as an lvalue. */
#define SLOT(op, member) (*(PyObject **)((char *)(op) + (member)->offset))

static int
indexing_traverse(PyObject *op, visitproc visit, void *arg)
{
    for (PyMemberDef *member = indexing_members; member->name != NULL; member++)
        Py_VISIT(SLOT(op, member));
    return 0;
}

static int
indexing_clear(PyObject *op)
{
    for (PyMemberDef *member = indexing_members; member->name != NULL; member++)
        Py_CLEAR(SLOT(op, member));
    return 0;
}

static void
indexing_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    indexing_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMappingMethods indexing_as_mapping = {
    .mp_subscript = indexing_subscript,
    .mp_ass_subscript = indexing_ass_subscript,
};

static PyTypeObject IndexingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "smartarray._speedups.Indexing",
    .tp_doc = PyDoc_STR("SmartArray's first base: its indexing fast paths as C slots, and "
                        "the attributes they read as slots."),
    .tp_basicsize = sizeof(Indexing),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_as_mapping = &indexing_as_mapping,
    .tp_members = indexing_members,
    .tp_traverse = indexing_traverse,
    .tp_clear = indexing_clear,
    .tp_dealloc = indexing_dealloc,
};

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *cls, *host, *both;

    if (!PyArg_ParseTuple(args, "O!OO:configure", &PyType_Type, &cls, &host, &both))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)cls, &IndexingType)) {
        PyErr_SetString(PyExc_TypeError, "configure: the class must derive from Indexing");
        return NULL;
    }
    Py_INCREF(cls);
    Py_INCREF(host);
    Py_INCREF(both);
    Py_XSETREF(smartarray_class, (PyTypeObject *)cls);
    Py_XSETREF(state_host, host);
    Py_XSETREF(state_both, both);
    Py_RETURN_NONE;
}

/* made(array): whether ``array._shape`` is set and not None, with no AttributeError made
 * for an array never initialised (``getattr(array, "_shape", None)`` makes one: 0.3 us). */
static PyObject *
made(PyObject *module, PyObject *array)
{
    if (!PyObject_TypeCheck(array, &IndexingType)) {
        PyErr_SetString(PyExc_TypeError, "made: not a SmartArray");
        return NULL;
    }
    PyObject *shape = ((Indexing *)array)->shape;
    return PyBool_FromLong(shape != NULL && shape != Py_None);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     PyDoc_STR("configure(cls, HOST, BOTH): the class views are made of, and the states.")},
    {"made", made, METH_O,
     PyDoc_STR("made(array): whether array._shape is set (not None): array was made.")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "smartarray._speedups",
    .m_doc = PyDoc_STR("SmartArray's indexing fast paths as C slots (optional)."),
    .m_size = -1,
    .m_methods = methods,
};

static int
intern(PyObject **name, const char *text)
{
    *name = PyUnicode_InternFromString(text);
    return *name == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module, *names;
    Py_ssize_t i;

    if (intern(&s_alloc, "_alloc") < 0 || intern(&s_host_token, "_host_token") < 0
        || intern(&s_state, "state") < 0 || intern(&s_host_event, "_host_event") < 0
        || intern(&s_device_event, "_device_event") < 0 || intern(&s_index, "_index") < 0
        || intern(&s_assign, "_assign") < 0 || intern(&s_setitem_py, "_setitem_py") < 0)
        return NULL;
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return NULL;
    /* object's own constructor: ``object.__new__(SmartArray)`` must stay allowed (it checks
     * that the class's tp_new is object's) */
    IndexingType.tp_new = PyBaseObject_Type.tp_new;
    if (PyType_Ready(&IndexingType) < 0)
        return NULL;
    module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    /* FIELDS: the slots' names, in order (the Python base has these __slots__) */
    names = PyTuple_New(sizeof(indexing_members) / sizeof(indexing_members[0]) - 1);
    if (names == NULL)
        goto error;
    for (i = 0; indexing_members[i].name != NULL; i++) {
        PyObject *name = PyUnicode_InternFromString(indexing_members[i].name);
        if (name == NULL) {
            Py_DECREF(names);
            goto error;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObject(module, "FIELDS", names) < 0) {
        Py_DECREF(names);
        goto error;
    }
    Py_INCREF(&IndexingType);
    if (PyModule_AddObject(module, "Indexing", (PyObject *)&IndexingType) < 0) {
        Py_DECREF(&IndexingType);
        goto error;
    }
    return module;
error:
    Py_DECREF(module);
    return NULL;
}
