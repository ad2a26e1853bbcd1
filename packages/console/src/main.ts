import './style.css';
import { utcDay } from '@trace-ingest/shared/dates';
import { ApiError, getJson, token, type Org } from './api.js';
import { h } from './dom.js';
import { customers } from './pages/customers.js';
import { models } from './pages/models.js';
import { overview } from './pages/overview.js';
import type { Page, PageParams } from './pages/page.js';
import { trace, traces } from './pages/traces.js';

/**
 * The console's shell: a token form, then the org and date range controls
 * and one page at a time. The route lives in the hash
 * (#/customers?org=acme&from=2026-01-01&to=2026-01-31) so a view can be
 * bookmarked; the token stays in this tab's sessionStorage.
 */

const PAGES: Record<string, { title: string; page: Page; nav: boolean }> = {
  overview: { title: 'Overview', page: overview, nav: true },
  customers: { title: 'Customers', page: customers, nav: true },
  models: { title: 'Models', page: models, nav: true },
  traces: { title: 'Traces', page: traces, nav: true },
  trace: { title: 'Trace', page: trace, nav: false },
};

const root = document.getElementById('app') as HTMLElement;
let cleanup: (() => void) | undefined;
let orgs: Org[] = [];

function route(): { name: string; arg?: string; params: URLSearchParams } {
  const [path = '', query = ''] = location.hash.replace(/^#\/?/, '').split('?');
  const [name = 'overview', ...rest] = path.split('/');
  return {
    name: PAGES[name] === undefined ? 'overview' : name,
    ...(rest.length > 0 ? { arg: decodeURIComponent(rest.join('/')) } : {}),
    params: new URLSearchParams(query),
  };
}

function go(name: string, params: Record<string, string>, arg?: string): void {
  location.hash = `#/${name}${arg === undefined ? '' : `/${encodeURIComponent(arg)}`}?${new URLSearchParams(params).toString()}`;
}

const today = () => utcDay(Date.now());
const monthStart = () => `${today().slice(0, 7)}-01`;

function login(message?: string): void {
  cleanup?.();
  cleanup = undefined;
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'tic_…', required: true, 'aria-label': 'console token' });
  const form = h(
    'form',
    {
      class: 'login card',
      onsubmit: (e: Event) => {
        e.preventDefault();
        token.set(input.value.trim());
        void start();
      },
    },
    h('h1', {}, 'trace-ingest cost console'),
    h('p', { class: 'muted' }, 'Paste a console token. An operator creates one with ', h('code', {}, 'trace-ingest console token create --name <you>'), '.'),
    message === undefined ? null : h('p', { class: 'error', role: 'alert' }, message),
    input,
    h('button', { type: 'submit' }, 'Open console'),
  );
  root.replaceChildren(form);
  input.focus();
}

async function start(): Promise<void> {
  if (token.get() === null) {
    login();
    return;
  }
  try {
    orgs = (await getJson<{ orgs: Org[] }>('orgs')).orgs;
  } catch (e) {
    token.clear();
    login(
      e instanceof ApiError && e.status === 401 ? `Refused: ${e.message}` : `Could not reach the console API: ${e instanceof Error ? e.message : String(e)}`,
    );
    return;
  }
  await render();
}

async function render(): Promise<void> {
  const r = route();
  const org = r.params.get('org') ?? orgs[0]?.name ?? '';
  const p: PageParams = { org, from: r.params.get('from') ?? monthStart(), to: r.params.get('to') ?? today(), ...(r.arg === undefined ? {} : { arg: r.arg }) };
  const params = { org: p.org, from: p.from, to: p.to };

  const orgSelect = h(
    'select',
    {
      'aria-label': 'org',
      name: 'org',
      onchange: (e: Event) => go(r.name === 'trace' ? 'traces' : r.name, { ...params, org: (e.target as HTMLSelectElement).value }),
    },
    ...orgs.map((o) => h('option', { value: o.name, selected: o.name === org }, o.name)),
  );
  // ISO dates whatever the browser's locale (a date input shows 01/10/2026 to some and 10.01.2026 to others).
  const dateInput = (name: string, value: string, label: string) =>
    h('input', {
      type: 'text',
      name,
      value,
      'aria-label': label,
      placeholder: 'YYYY-MM-DD',
      pattern: '\\d{4}-\\d{2}-\\d{2}',
      inputmode: 'numeric',
      size: 10,
      required: true,
      title: 'a UTC day, YYYY-MM-DD',
    });
  const fromInput = dateInput('from', p.from, 'from');
  const toInput = dateInput('to', p.to, 'to (inclusive)');
  const rangeForm = h(
    'form',
    {
      class: 'range',
      onsubmit: (e: Event) => {
        e.preventDefault();
        go(r.name === 'trace' ? 'traces' : r.name, { ...params, from: fromInput.value, to: toInput.value });
      },
    },
    fromInput,
    h('span', { class: 'muted' }, '→'),
    toInput,
    h('button', { type: 'submit' }, 'Apply'),
  );
  const nav = h(
    'nav',
    {},
    ...Object.entries(PAGES)
      .filter(([, v]) => v.nav)
      .map(([k, v]) =>
        h(
          'a',
          {
            href: `#/${k}?${new URLSearchParams(params).toString()}`,
            class: k === r.name || (k === 'traces' && r.name === 'trace') ? 'active' : undefined,
            'data-nav': k,
          },
          v.title,
        ),
      ),
  );
  const signOut = h('button', { type: 'button', class: 'link', onclick: () => (token.clear(), login()) }, 'Sign out');
  const main = h('main', { 'aria-busy': 'true' }, h('p', { class: 'muted pad' }, 'Loading…'));
  root.replaceChildren(
    h('header', { class: 'top' }, h('div', { class: 'brand' }, 'trace-ingest ', h('span', { class: 'muted' }, 'cost console')), orgSelect, rangeForm, signOut),
    nav,
    main,
  );
  document.title = `${PAGES[r.name]?.title ?? ''} · ${org} · trace-ingest`;

  cleanup?.();
  cleanup = undefined;
  if (orgs.length === 0) {
    main.replaceChildren(h('p', { class: 'muted pad' }, 'This token sees no org yet: create one with "trace-ingest orgs create <name>".'));
    main.setAttribute('aria-busy', 'false');
    return;
  }
  try {
    const page = PAGES[r.name]?.page ?? overview;
    const rendered = await page(p);
    main.replaceChildren(rendered.node);
    cleanup = rendered.mounted?.();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      token.clear();
      login(`Refused: ${e.message}`);
      return;
    }
    main.replaceChildren(h('p', { class: 'error pad', role: 'alert' }, e instanceof Error ? e.message : String(e)));
  }
  main.setAttribute('aria-busy', 'false');
}

window.addEventListener('hashchange', () => {
  if (token.get() !== null) void render();
});
void start();
