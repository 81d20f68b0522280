// rules.js: the recording rules page (/recording-rules): the tenant's rules
// from settings.v1.RecordingRulesService, a form that creates one, and a
// delete button per rule. The server validates (as Pyroscope does); its
// refusal is shown as it comes.
import { el } from './util.js';

// "a, b" -> ['a', 'b']
function list(text) {
  return text.split(',').map((s) => s.trim()).filter(Boolean);
}

// "k=v, k2=v2" -> [{name, value}]
function pairs(text) {
  return list(text).map((kv) => {
    const i = kv.indexOf('=');
    return i < 0 ? { name: kv, value: '' } : { name: kv.slice(0, i).trim(), value: kv.slice(i + 1).trim() };
  });
}

export class RulesView {
  constructor(root, api, onError) {
    this.kind = 'rules';
    this.api = api;
    this.onError = onError;
    this.build(root);
  }

  field(id, label, placeholder) {
    const input = el('input', { id, placeholder, spellcheck: false, autocomplete: 'off' });
    return { input, node: el('label', { class: 'rule-field' }, label, input) };
  }

  build(root) {
    this.metric = this.field('rule-metric', 'Metric name', 'profiles_recorded_cpu_seconds');
    this.matchers = this.field('rule-matchers', 'Selector', '{__profile_type__="process_cpu:cpu:nanoseconds:cpu:nanoseconds"}');
    this.groupBy = this.field('rule-group-by', 'Group by (comma-separated)', 'service_name');
    this.external = this.field('rule-external', 'External labels (k=v, comma-separated)', 'team=core');
    this.fn = this.field('rule-function', 'Only stacks through function (optional)', 'runtime.gcBgMarkWorker');
    const form = el('form', { id: 'rule-form', class: 'rule-form' },
      el('h2', {}, 'New recording rule'),
      [this.metric, this.matchers, this.groupBy, this.external, this.fn].map((f) => f.node),
      el('button', { type: 'submit', class: 'primary' }, 'Create rule'));
    form.addEventListener('submit', (e) => { e.preventDefault(); this.create(); });
    this.table = el('table', { id: 'rules-table', class: 'rules' });
    root.append(el('section', { class: 'pane rules-pane', 'aria-label': 'Recording rules' },
      el('h2', {}, 'Recording rules'), this.table), form);
  }

  async update() {
    const rules = await this.api.listRules();
    const head = el('tr', {}, ['Id', 'Metric', 'Selector', 'Group by', 'Function', ''].map((h) => el('th', {}, h)));
    const rows = rules.map((r) => {
      const del = el('button', { type: 'button', class: 'rule-delete', 'aria-label': `Delete rule ${r.id}` }, 'Delete');
      del.addEventListener('click', () => this.remove(r.id));
      const fn = r.stacktraceFilter?.functionName?.functionName || '';
      return el('tr', { 'data-id': r.id }, el('td', {}, r.id), el('td', {}, r.metricName),
        el('td', {}, (r.matchers || []).join(' ')), el('td', {}, (r.groupBy || []).join(', ')), el('td', {}, fn), el('td', {}, del));
    });
    const empty = rules.length ? null : el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No recording rules yet.'));
    this.table.replaceChildren(head, ...rows, ...(empty ? [empty] : []));
    document.body.dataset.state = 'ready';
  }

  async create() {
    const rule = {
      metricName: this.metric.input.value.trim(),
      matchers: [this.matchers.input.value.trim()].filter(Boolean),
      groupBy: list(this.groupBy.input.value),
      externalLabels: pairs(this.external.input.value),
    };
    const fn = this.fn.input.value.trim();
    if (fn) rule.stacktraceFilter = { functionName: { functionName: fn, metricType: 'TOTAL' } };
    await this.run(() => this.api.upsertRule(rule), 'Creating the rule');
  }

  async remove(id) {
    await this.run(() => this.api.deleteRule(id), `Deleting rule ${id}`);
  }

  async run(action, what) {
    document.body.dataset.state = 'loading';
    try {
      await action();
      this.onError(null);
      await this.update();
    } catch (e) {
      this.onError(e, what);
    }
  }
}
