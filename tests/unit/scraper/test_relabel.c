/*
 * test_relabel.c — Prometheus relabel_configs (services/scraper/src/relabel.c), case
 * by case: every action, Go's template expansion rules ($1x, ${1}x, $$),
 * anchoring, missing labels, hashmod against values computed independently
 * (Python hashlib: last 8 digest bytes big-endian, modulo), and the configs
 * Prometheus rejects, each with the field named in the error.
 */
#include <yaml.h>

#include "lc_test.h"
#include "relabel.h"

/* ---------------------------------------------------------------- helpers */

static int load_rules(const char *yaml_text, scr_relabel_t *rl, lc_status_t *st)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml_text, strlen(yaml_text));
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_parser_delete(&parser);
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "bad test YAML");
    }
    int rc =
        scr_relabel_parse_yaml(&doc, yaml_document_get_root_node(&doc), "relabel_configs", rl, st);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

/* "a=1,b=2" -> labels (values may be empty: "a="). */
static void parse_labels(const char *s, lc_labels_t *ls)
{
    lc_labels_init(ls);
    char *copy = lc_xstrdup(s);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        lc_labels_add(ls, tok, eq + 1);
    }
    lc_free(copy);
}

static char *format_labels(lc_labels_t *ls)
{
    lc_labels_sort(ls);
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    for (size_t i = 0; i < ls->n; i++)
        if (lc_buf_printf(&b, "%s%s=%s", i ? "," : "", ls->v[i].name, ls->v[i].value))
            abort();
    if (lc_buf_putc(&b, '\0'))
        abort();
    size_t len;
    return (char *)lc_buf_steal(&b, &len);
}

typedef struct relabel_case_s {
    const char *rules; /* YAML list */
    const char *in;    /* labels */
    const char *want;  /* labels after relabeling (sorted), or NULL = dropped */
} relabel_case_t;

static const relabel_case_t cases[] = {
    /* replace */
    {"- {source_labels: [a], target_label: b}", "a=foo", "a=foo,b=foo"},
    {"- {source_labels: [a], regex: 'f(.*)', target_label: d, replacement: 'ch${1}-ch${1}'}",
     "a=foo", "a=foo,d=choo-choo"},
    {"- {source_labels: [a, b], regex: 'f(.*);(.*)r', target_label: a, replacement: '${1}${2}'}",
     "a=foo,b=bar", "a=ooba,b=bar"},
    {"- {source_labels: [a, b], separator: '|', target_label: c}", "a=x,b=y", "a=x,b=y,c=x|y"},
    {"- {source_labels: [a], regex: 'nomatch', target_label: b, replacement: x}", "a=foo", "a=foo"},
    {"- {source_labels: [a], regex: 'o', target_label: b, replacement: x}", "a=foo", "a=foo"},
    {"- {source_labels: [a], regex: '(.*)', target_label: b, replacement: ''}", "a=foo,b=old",
     "a=foo"},
    {"- {source_labels: [missing], target_label: b, replacement: fixed}", "a=1", "a=1,b=fixed"},
    {"- {target_label: b, replacement: static}", "a=1", "a=1,b=static"},
    {"- {source_labels: [a], regex: '(.*)', target_label: '${1}', replacement: v}", "a=newname",
     "a=newname,newname=v"},
    {"- {source_labels: [a], regex: '(.*)', target_label: '${1}', replacement: v}", "a=1bad",
     "a=1bad"},
    {"- {source_labels: [a], target_label: b, replacement: '$1x'}", "a=foo", "a=foo"},
    {"- {source_labels: [a], target_label: b, replacement: '${1}x'}", "a=foo", "a=foo,b=foox"},
    {"- {source_labels: [a], target_label: b, replacement: '$$1 $'}", "a=foo", "a=foo,b=$1 $"},
    {"- {source_labels: [a], regex: '(?P<host>[^:]+):(?P<port>\\d+)', target_label: b, "
     "replacement: '$port-${host}'}",
     "a=h:80", "a=h:80,b=80-h"},
    {"- {source_labels: [a], regex: 'a.b', target_label: b, replacement: yes}", "a=a\nb",
     "a=a\nb,b=yes"},
    /* keep / drop */
    {"- {source_labels: [a], regex: 'foo|bar', action: keep}", "a=bar", "a=bar"},
    {"- {source_labels: [a], regex: 'foo|bar', action: keep}", "a=baz", NULL},
    {"- {source_labels: [a], regex: 'o', action: keep}", "a=foo", NULL},
    {"- {source_labels: [a], regex: 'f.*', action: Drop}", "a=foo", NULL},
    {"- {source_labels: [a], regex: 'f.*', action: drop}", "a=bar", "a=bar"},
    {"- {source_labels: [missing], regex: '', action: keep}", "a=1", "a=1"},
    {"- {source_labels: [a], target_label: b, action: keepequal}", "a=1,b=1", "a=1,b=1"},
    {"- {source_labels: [a], target_label: b, action: keepequal}", "a=1,b=2", NULL},
    {"- {source_labels: [a], target_label: b, action: dropequal}", "a=1,b=1", NULL},
    /* hashmod (expected values from Python hashlib) */
    {"- {source_labels: [a], modulus: 4, target_label: h, action: hashmod}", "a=10.0.0.1:8080",
     "a=10.0.0.1:8080,h=0"},
    {"- {source_labels: [a], modulus: 10, target_label: h, action: hashmod}", "a=a", "a=a,h=7"},
    {"- {source_labels: [a, b], modulus: 1000, target_label: h, action: hashmod}", "a=foo,b=bar",
     "a=foo,b=bar,h=750"},
    {"- {source_labels: [a], modulus: 7, target_label: h, action: hashmod}", "b=x", "b=x,h=1"},
    /* labelmap / labeldrop / labelkeep */
    {"- {regex: '__meta_(.+)', action: labelmap}", "__meta_pod=p,__meta_ns=n,x=1",
     "__meta_ns=n,__meta_pod=p,ns=n,pod=p,x=1"},
    {"- {regex: '__meta_(.+)', replacement: 'k_${1}', action: labelmap}", "__meta_pod=p",
     "__meta_pod=p,k_pod=p"},
    {"- {regex: 'b.*', action: labeldrop}", "a=1,b=2,bc=3", "a=1"},
    {"- {regex: 'b.*', action: labelkeep}", "a=1,b=2,bc=3", "b=2,bc=3"},
    /* lowercase / uppercase */
    {"- {source_labels: [a], target_label: l, action: lowercase}", "a=FoO", "a=FoO,l=foo"},
    {"- {source_labels: [a, b], target_label: u, action: uppercase}", "a=x,b=y", "a=x,b=y,u=X;Y"},
    /* rules run in order */
    {"- {source_labels: [a], target_label: b}\n"
     "- {source_labels: [b], regex: foo, action: drop}",
     "a=foo", NULL},
    {"- {source_labels: [__address__], regex: '([^:]+):.*', target_label: __address__, "
     "replacement: '${1}:6060'}\n"
     "- {regex: '__tmp.*', action: labeldrop}",
     "__address__=10.1.2.3:8080,__tmp_x=1", "__address__=10.1.2.3:6060"},
};

static void test_cases(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        const relabel_case_t *c = &cases[i];
        scr_relabel_t rl;
        lc_status_t st = {0};
        if (load_rules(c->rules, &rl, &st) != 0) {
            LC_FAIL_("case %zu: rules rejected: %s", i, st.msg);
            scr_relabel_fini(&rl);
            continue;
        }
        lc_labels_t ls;
        parse_labels(c->in, &ls);
        bool kept = scr_relabel_apply(&rl, &ls);
        lc_test_checks++;
        if (!c->want && kept) {
            char *got = format_labels(&ls);
            LC_FAIL_("case %zu: want dropped, got {%s}", i, got);
            lc_free(got);
        } else if (c->want && !kept) {
            LC_FAIL_("case %zu: want {%s}, got dropped", i, c->want);
        } else if (c->want) {
            char *got = format_labels(&ls);
            if (strcmp(got, c->want) != 0)
                LC_FAIL_("case %zu: want {%s}, got {%s}", i, c->want, got);
            lc_free(got);
        }
        lc_labels_fini(&ls);
        scr_relabel_fini(&rl);
    }
}

typedef struct bad_case_s {
    const char *rules;
    const char *field; /* must appear in the error */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"- {source_labels: [a], action: explode}", "unknown relabel action"},
    {"- {source_labels: [a], action: ''}", "action"},
    {"- {source_labels: [a], target_label: h, action: hashmod}", "modulus"},
    {"- {source_labels: [a], modulus: -1, target_label: h, action: hashmod}", "modulus"},
    {"- {source_labels: [a]}", "target_label"},
    {"- {source_labels: [a], target_label: '1abc'}", "target_label"},
    {"- {source_labels: [a], target_label: 'a-b'}", "target_label"},
    {"- {source_labels: [a], target_label: '${1', replacement: x}", "target_label"},
    {"- {source_labels: [a], target_label: x, action: lowercase, replacement: y}", "replacement"},
    {"- {source_labels: [a], target_label: '$1', action: uppercase}", "target_label"},
    {"- {source_labels: [a], regex: x, action: labeldrop}", "requires only 'regex'"},
    {"- {regex: x, target_label: y, action: labelkeep}", "requires only 'regex'"},
    {"- {source_labels: [a], target_label: b, regex: x, action: keepequal}", "keepequal"},
    {"- {regex: '(.*)', replacement: 'a-$1', action: labelmap}", "replacement"},
    {"- {source_labels: [a], regex: '(unclosed', target_label: b}", "regex"},
    {"- {source_labels: ['bad-name'], target_label: b}", "source_labels"},
    {"- {source_labels: a, target_label: b}", "source_labels"},
    {"- {source_labels: [a], target_label: b, typo: 1}", "typo"},
    {"- null", "null relabeling rule"},
    {"-", "null relabeling rule"},
    {"{a: b}", "expected a list"},
};

static void test_bad_configs(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(bad_cases); i++) {
        scr_relabel_t rl;
        lc_status_t st = {0};
        int rc = load_rules(bad_cases[i].rules, &rl, &st);
        lc_test_checks++;
        if (rc == 0)
            LC_FAIL_("bad case %zu accepted: %s", i, bad_cases[i].rules);
        else if (!strstr(st.msg, bad_cases[i].field))
            LC_FAIL_("bad case %zu: error \"%s\" does not name \"%s\"", i, st.msg,
                     bad_cases[i].field);
        else if (!strstr(st.msg, "relabel_configs[0]") && !strstr(st.msg, "expected a list"))
            LC_FAIL_("bad case %zu: error \"%s\" does not name the rule", i, st.msg);
        scr_relabel_fini(&rl);
    }
}

static void test_expand_go_semantics(void)
{
    /* subject "abc", group 1 = "b", group 2 unset. */
    const long groups[] = {0, 3, 1, 2, -1, -1};
    const char *names[] = {NULL, "mid", "none"};
    struct {
        const char *tmpl, *want;
    } t[] = {
        {"$1", "b"},         {"${1}", "b"}, {"$1x", ""},         {"${1}x", "bx"}, {"$mid", "b"},
        {"${mid}", "b"},     {"$none", ""}, {"$2", ""},          {"$9", ""},      {"$$", "$"},
        {"$", "$"},          {"${", "${"},  {"${1", "${1"},      {"$-", "$-"},    {"a$0z", "a"},
        {"a${0}z", "aabcz"}, {"$01", ""},   {"x${mid}y", "xby"},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(t); i++) {
        lc_buf_t b;
        lc_buf_init(&b, 1024);
        LC_ASSERT_OK(scr_relabel_expand(t[i].tmpl, "abc", groups, 3, names, &b));
        LC_ASSERT_OK(lc_buf_putc(&b, '\0'));
        LC_ASSERT_STR_EQ((const char *)b.data, t[i].want);
        lc_buf_fini(&b);
    }
}

static void test_action_names(void)
{
    LC_ASSERT_EQ(scr_relabel_action_parse("HashMod"), SCR_RELABEL_HASHMOD);
    LC_ASSERT_EQ(scr_relabel_action_parse("nope"), -1);
    LC_ASSERT_STR_EQ(scr_relabel_action_name(SCR_RELABEL_LABELKEEP), "labelkeep");
}

LC_TEST_MAIN(test_cases, test_bad_configs, test_expand_go_semantics, test_action_names)
