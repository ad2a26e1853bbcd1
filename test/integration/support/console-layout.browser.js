/* global window, document, getComputedStyle */

/**
 * Runs in the console page (console.test.ts evaluates it): what a person
 * would see of the page's layout at the window's width.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- called by the test's page.evaluate
function probeLayout() {
  const w = window.innerWidth;
  const onScreen = (el) => {
    const b = el.getBoundingClientRect();
    return b.width > 0 && b.height > 0 && b.left >= -1 && b.right <= w + 1;
  };
  const hidden = (el) => getComputedStyle(el).display === 'none';
  const cells = [...document.querySelectorAll('td')];
  return {
    // Sideways scrolling of the page, or of a table in its box.
    overflow: document.documentElement.scrollWidth - w,
    scrolling: [...document.querySelectorAll('.scroll')].filter((s) => s.scrollWidth > s.clientWidth + 1).length,
    offScreen: cells.filter((td) => !hidden(td) && !onScreen(td)).map((td) => `${td.getAttribute('data-col')}: ${td.textContent}`),
    hiddenCols: [...new Set(cells.filter(hidden).map((td) => td.getAttribute('data-col') ?? ''))],
    budgets: [...document.querySelectorAll('[data-budget]')].map((b) => onScreen(b)),
    money: [...document.querySelectorAll('[data-table]')].flatMap((t) =>
      [...new Set([...t.querySelectorAll('td.money')].map((td) => td.getAttribute('data-col') ?? ''))].map((col) => ({
        table: t.getAttribute('data-table') ?? '',
        col,
        cells: [...t.querySelectorAll(`td.money[data-col="${col}"]`)].map((td) => ({
          value: td.getAttribute('data-value') ?? '',
          text: (td.firstChild?.textContent ?? '').trim(),
          visible: !hidden(td) && onScreen(td),
        })),
      })),
    ),
    // Cards as tall as their content, not stretched empty by a taller neighbour: room under the last line.
    stretched: [...document.querySelectorAll('.kpi')]
      .filter((k) => {
        const style = getComputedStyle(k);
        const last = Math.max(...[...k.children].map((c) => c.getBoundingClientRect().bottom));
        const empty = k.getBoundingClientRect().bottom - last - parseFloat(style.paddingBottom) - parseFloat(style.borderBottomWidth);
        return empty > 8;
      })
      .map((k) => k.getAttribute('data-kpi')),
    // Command lines broken inside a word: the text up to each such break.
    brokenWords: [...document.querySelectorAll('.fix code')].flatMap((code) => {
      const chars = [];
      const walk = document.createTreeWalker(code, 4 /* NodeFilter.SHOW_TEXT */);
      const range = document.createRange();
      for (let node = walk.nextNode(); node !== null; node = walk.nextNode())
        for (let i = 0; i < node.data.length; i++) {
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          chars.push({ c: node.data[i], top: Math.round(range.getBoundingClientRect().top) });
        }
      const text = chars.map((x) => x.c).join('');
      return chars.flatMap((x, i) => (i > 0 && x.top > chars[i - 1].top && x.c !== ' ' && chars[i - 1].c !== ' ' ? [text.slice(0, i)] : []));
    }),
  };
}
