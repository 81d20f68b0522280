/*
 * arrow_schema.c — the Schema message into lc_arrow_field_t trees. Table and
 * union numbering are facts of Arrow's format/Schema.fbs: Field {name 0,
 * nullable 1, type_type 2, type 3, dictionary 4, children 5,
 * custom_metadata 6}; Schema {endianness 0, fields 1, custom_metadata 2}.
 */
#include <string.h>

#include "arrow_int.h"

/* Type union tags (Schema.fbs). */
enum {
    TYPE_INT = 2,
    TYPE_BINARY = 4,
    TYPE_UTF8 = 5,
    TYPE_BOOL = 6,
    TYPE_TIMESTAMP = 10,
    TYPE_LIST = 12,
    TYPE_STRUCT = 13,
    TYPE_FIXED_SIZE_BINARY = 15,
    TYPE_LARGE_BINARY = 19,
    TYPE_LARGE_UTF8 = 20,
    TYPE_LARGE_LIST = 21,
    TYPE_RUN_END_ENCODED = 22,
    TYPE_BINARY_VIEW = 23,
    TYPE_UTF8_VIEW = 24,
    TYPE_LIST_VIEW = 25,
    TYPE_LARGE_LIST_VIEW = 26,
};

typedef struct schema_walk_s {
    lc_arrow_stream_t *s;
    size_t n_fields;
    lc_status_t *st;
} schema_walk_t;

static int corrupt(lc_status_t *st, const char *what)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "arrow: malformed %s in the schema", what);
}

static char *arena_string(lc_arena_t *arena, const afb_table_t *t, unsigned id, int *rc)
{
    const char *p;
    size_t n;
    *rc = afb_string(t, id, &p, &n);
    if (*rc != 0)
        return NULL;
    char *s = lc_arena_strndup(arena, p, n);
    if (!s)
        *rc = -1;
    return s;
}

/* The number of children a type must have, or -1 for "any". */
static int expected_children(lc_arrow_kind_t kind)
{
    switch (kind) {
    case LC_ARROW_LIST:
    case LC_ARROW_LARGE_LIST:
    case LC_ARROW_LIST_VIEW:
    case LC_ARROW_LARGE_LIST_VIEW:
        return 1;
    case LC_ARROW_RUN_END:
        return 2;
    case LC_ARROW_STRUCT:
        return -1;
    default:
        return 0;
    }
}

static int int_type_of(const afb_table_t *type, lc_arrow_field_t *f)
{
    int64_t bits = 0, is_signed = 0;
    if (afb_int(type, 0, 4, &bits) < 0 || afb_int(type, 1, 1, &is_signed) < 0)
        return -1;
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
        return -1;
    f->kind = LC_ARROW_INT;
    f->bit_width = (int)bits;
    f->is_signed = is_signed != 0;
    return 0;
}

/* Sets kind and parameters from the Type union; 1 for an unsupported type. */
static int field_type(int64_t tag, const afb_table_t *type, lc_arrow_field_t *f)
{
    int64_t v = 0;
    static const struct {
        int tag;
        lc_arrow_kind_t kind;
        bool utf8;
    } plain[] = {
        {TYPE_BINARY, LC_ARROW_BINARY, false},
        {TYPE_UTF8, LC_ARROW_BINARY, true},
        {TYPE_LARGE_BINARY, LC_ARROW_LARGE_BINARY, false},
        {TYPE_LARGE_UTF8, LC_ARROW_LARGE_BINARY, true},
        {TYPE_BINARY_VIEW, LC_ARROW_BINARY_VIEW, false},
        {TYPE_UTF8_VIEW, LC_ARROW_BINARY_VIEW, true},
        {TYPE_BOOL, LC_ARROW_BOOL, false},
        {TYPE_LIST, LC_ARROW_LIST, false},
        {TYPE_LARGE_LIST, LC_ARROW_LARGE_LIST, false},
        {TYPE_LIST_VIEW, LC_ARROW_LIST_VIEW, false},
        {TYPE_LARGE_LIST_VIEW, LC_ARROW_LARGE_LIST_VIEW, false},
        {TYPE_STRUCT, LC_ARROW_STRUCT, false},
        {TYPE_RUN_END_ENCODED, LC_ARROW_RUN_END, false},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(plain); i++) {
        if (plain[i].tag == tag) {
            f->kind = plain[i].kind;
            f->is_utf8 = plain[i].utf8;
            return 0;
        }
    }
    switch (tag) {
    case TYPE_INT:
        return int_type_of(type, f);
    case TYPE_TIMESTAMP:
        if (afb_int(type, 0, 2, &v) < 0 || v < 0 || v > 3)
            return -1;
        *f = (lc_arrow_field_t){.name = f->name,
                                .nullable = f->nullable,
                                .kind = LC_ARROW_INT,
                                .is_timestamp = true,
                                .time_unit = (int)v,
                                .bit_width = 64,
                                .is_signed = true};
        return 0;
    case TYPE_FIXED_SIZE_BINARY:
        if (afb_int(type, 0, 4, &v) < 0 || v < 1 || v > INT32_MAX)
            return -1;
        f->kind = LC_ARROW_FIXED_BINARY;
        f->byte_width = (int32_t)v;
        return 0;
    default:
        return 1;
    }
}

static int field_dictionary(const afb_table_t *field, lc_arrow_field_t *f)
{
    afb_table_t enc, index;
    int rc = afb_table(field, 4, &enc);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    int64_t id = 0;
    if (afb_int(&enc, 0, 8, &id) < 0)
        return -1;
    f->dict_encoded = true;
    f->dict_id = id;
    f->index_bit_width = 32; /* an absent indexType means int32 */
    f->index_signed = true;
    rc = afb_table(&enc, 1, &index);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        lc_arrow_field_t idx = {0};
        if (int_type_of(&index, &idx) != 0)
            return -1;
        f->index_bit_width = idx.bit_width;
        f->index_signed = idx.is_signed;
    }
    return 0;
}

/* The field metadata's ARROW:extension:name, kept so callers can tell arrow.uuid. */
static int field_extension(lc_arena_t *arena, const afb_table_t *field, lc_arrow_field_t *f)
{
    afb_vector_t meta;
    int rc = afb_vector(field, 6, 4, &meta);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    for (size_t i = 0; i < meta.n; i++) {
        afb_table_t kv;
        const char *key;
        size_t key_len;
        if (afb_vector_table(&meta, i, &kv) != 0 || afb_string(&kv, 0, &key, &key_len) < 0)
            return -1;
        if (key_len == 20 && memcmp(key, "ARROW:extension:name", 20) == 0) {
            f->extension_name = arena_string(arena, &kv, 1, &rc);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

static int schema_fields(schema_walk_t *w, const afb_table_t *parent, unsigned id,
                         lc_arrow_field_t **out, size_t *n_out, size_t depth);

static int schema_field(schema_walk_t *w, const afb_table_t *t, lc_arrow_field_t *f, size_t depth)
{
    int rc;
    int64_t nullable = 0, tag = 0;
    f->name = arena_string(w->s->arena, t, 0, &rc);
    if (rc < 0 || afb_int(t, 1, 1, &nullable) < 0 || afb_int(t, 2, 1, &tag) < 0)
        return corrupt(w->st, "field");
    if (!f->name)
        f->name = "";
    f->nullable = nullable != 0;
    afb_table_t type = {0};
    if (afb_table(t, 3, &type) < 0)
        return corrupt(w->st, "field type");
    rc = field_type(tag, &type, f);
    if (rc > 0)
        return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: field \"%s\" has an unsupported type (Type union tag %lld)",
                             f->name, (long long)tag);
    if (rc < 0 || field_dictionary(t, f) < 0 || field_extension(w->s->arena, t, f) < 0)
        return corrupt(w->st, "field type");
    if (schema_fields(w, t, 5, &f->children, &f->n_children, depth + 1) != 0)
        return -1;
    int want = expected_children(f->kind);
    if (want >= 0 && f->n_children != (size_t)want)
        return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: field \"%s\" has %zu children, its type needs %d", f->name,
                             f->n_children, want);
    if (f->kind == LC_ARROW_RUN_END &&
        (f->children[0].kind != LC_ARROW_INT || f->children[0].dict_encoded ||
         f->children[0].bit_width < 16 || !f->children[0].is_signed))
        return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: field \"%s\": run ends must be int16, int32 or int64",
                             f->name);
    return 0;
}

static int schema_fields(schema_walk_t *w, const afb_table_t *parent, unsigned id,
                         lc_arrow_field_t **out, size_t *n_out, size_t depth)
{
    afb_vector_t v;
    int rc = afb_vector(parent, id, 4, &v);
    if (rc < 0)
        return corrupt(w->st, "field list");
    if (rc > 0 || v.n == 0)
        return 0;
    if (depth > w->s->lim.max_depth)
        return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: the schema nests deeper than %zu", w->s->lim.max_depth);
    if (v.n > w->s->lim.max_fields - w->n_fields)
        return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: the schema has more than %zu fields", w->s->lim.max_fields);
    w->n_fields += v.n;
    lc_arrow_field_t *fields = lc_arena_calloc(w->s->arena, v.n, sizeof(*fields));
    if (!fields)
        return lc_status_set(w->st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    for (size_t i = 0; i < v.n; i++) {
        afb_table_t t;
        if (afb_vector_table(&v, i, &t) != 0)
            return corrupt(w->st, "field");
        if (schema_field(w, &t, &fields[i], depth) != 0)
            return -1;
    }
    *out = fields;
    *n_out = v.n;
    return 0;
}

static int schema_metadata(lc_arrow_stream_t *s, const afb_table_t *schema, lc_status_t *st)
{
    afb_vector_t meta;
    int rc = afb_vector(schema, 2, 4, &meta);
    if (rc != 0)
        return rc < 0 ? corrupt(st, "custom_metadata") : 0;
    lc_arrow_schema_t *sc = &s->schema;
    sc->meta_keys = lc_arena_calloc(s->arena, meta.n + 1, sizeof(char *));
    sc->meta_values = lc_arena_calloc(s->arena, meta.n + 1, sizeof(char *));
    if (!sc->meta_keys || !sc->meta_values)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    for (size_t i = 0; i < meta.n; i++) {
        afb_table_t kv;
        int rk = 0, rv = 0;
        if (afb_vector_table(&meta, i, &kv) != 0)
            return corrupt(st, "custom_metadata");
        const char *k = arena_string(s->arena, &kv, 0, &rk);
        const char *v = arena_string(s->arena, &kv, 1, &rv);
        if (rk < 0 || rv < 0)
            return corrupt(st, "custom_metadata");
        sc->meta_keys[sc->n_meta] = k ? k : "";
        sc->meta_values[sc->n_meta++] = v ? v : "";
    }
    return 0;
}

/* Remembers every dictionary-encoded field, nested ones included, so a
 * DictionaryBatch finds its type by id. */
static int collect_dicts(lc_arrow_stream_t *s, lc_arrow_field_t *fields, size_t n, lc_status_t *st)
{
    for (size_t i = 0; i < n; i++) {
        lc_arrow_field_t *f = &fields[i];
        if (f->dict_encoded) {
            for (size_t k = 0; k < s->n_dicts; k++)
                if (s->dict_fields[k]->dict_id == f->dict_id)
                    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                         "arrow: dictionary id %lld is used twice",
                                         (long long)f->dict_id);
            s->dict_fields[s->n_dicts++] = f;
        }
        if (collect_dicts(s, f->children, f->n_children, st) != 0)
            return -1;
    }
    return 0;
}

int arrow_schema_read(lc_arrow_stream_t *s, const afb_table_t *schema, lc_status_t *st)
{
    schema_walk_t w = {s, 0, st};
    int64_t endianness = 0;
    if (afb_int(schema, 0, 2, &endianness) < 0)
        return corrupt(st, "endianness");
    if (endianness != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "arrow: big-endian streams are not supported");
    if (schema_fields(&w, schema, 1, &s->schema.fields, &s->schema.n_fields, 1) != 0 ||
        schema_metadata(s, schema, st) != 0)
        return -1;
    s->dict_fields = lc_arena_calloc(s->arena, w.n_fields + 1, sizeof(*s->dict_fields));
    s->dicts = lc_arena_calloc(s->arena, w.n_fields + 1, sizeof(*s->dicts));
    if (!s->dict_fields || !s->dicts)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "arrow: out of memory");
    return collect_dicts(s, s->schema.fields, s->schema.n_fields, st);
}
