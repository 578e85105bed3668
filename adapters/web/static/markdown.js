// The markdown subset of parley's web page, rendered into DOM nodes: every
// piece of text becomes a text node, so nothing people or agents write is
// ever parsed as HTML. Blocks: fenced code, headings, quotes, lists, rules,
// paragraphs. Inline: code, bold, italic, strike-through, http(s)/mailto
// links (opening in a new tab with rel="noopener noreferrer").
'use strict';

function mdEl(tag, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  return e;
}

function markdown(src, parent) {
  const lines = String(src).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  const isBlank = (l) => /^\s*$/.test(l);
  const fenceRe = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  const listRe = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const startsBlock = (l) => fenceRe.test(l) || /^ {0,3}#{1,6}\s/.test(l) || /^ {0,3}>/.test(l) ||
    listRe.test(l) || /^ {0,3}([-*_])( *\1){2,} *$/.test(l);
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (isBlank(line)) { i++; continue; }
    if ((m = line.match(fenceRe))) {
      const fence = m[1];
      const code = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) code.push(lines[i++]);
      i++;
      const pre = mdEl('pre');
      const c = mdEl('code', code.join('\n'));
      if (m[2]) c.dataset.lang = m[2];
      pre.append(c);
      parent.append(pre);
      continue;
    }
    if ((m = line.match(/^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/))) {
      const h = mdEl('h' + Math.min(6, m[1].length + 2));
      inline(m[2], h);
      parent.append(h);
      i++;
      continue;
    }
    if (/^ {0,3}([-*_])( *\1){2,} *$/.test(line)) { parent.append(mdEl('hr')); i++; continue; }
    if (/^ {0,3}>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^ {0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^ {0,3}> ?/, ''));
      const bq = mdEl('blockquote');
      markdown(quoted.join('\n'), bq);
      parent.append(bq);
      continue;
    }
    if ((m = line.match(listRe))) {
      const ordered = /\d/.test(m[1]);
      const list = mdEl(ordered ? 'ol' : 'ul');
      if (ordered && parseInt(m[1], 10) !== 1) list.start = parseInt(m[1], 10);
      while (i < lines.length) {
        const lm = lines[i].match(listRe);
        if (!lm || /\d/.test(lm[1]) !== ordered) break;
        const body = [lm[2]];
        i++;
        while (i < lines.length && !isBlank(lines[i]) && !listRe.test(lines[i]) && /^\s{2,}/.test(lines[i])) {
          body.push(lines[i++].trim());
        }
        const li = mdEl('li');
        inline(body.join('\n'), li);
        list.append(li);
      }
      parent.append(list);
      continue;
    }
    const para = [line];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i])) para.push(lines[i++]);
    const p = mdEl('p');
    inline(para.join('\n'), p);
    parent.append(p);
  }
}

const INLINE = new RegExp([
  '(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)', // 1,2 code
  '\\[([^\\]\\n]+)\\]\\(([^)\\s]+)\\)', // 3,4 link
  '\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*', // 5 bold
  '(?<![\\w])__(?=\\S)([\\s\\S]*?\\S)__(?![\\w])', // 6 bold
  '~~(?=\\S)([\\s\\S]*?\\S)~~', // 7 strike
  '\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*', // 8 italic
  '(?<![\\w])_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?![\\w])', // 9 italic
  '(https?://[^\\s<>()]*[^\\s<>().,;:!?\'"])', // 10 bare link
].join('|'), 'g');

function safeURL(u) { return /^(https?:|mailto:)/i.test(u) ? u : ''; }

function link(href, parent) {
  const a = mdEl('a');
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  parent.append(a);
  return a;
}

function inline(text, parent) {
  let last = 0;
  INLINE.lastIndex = 0;
  const matches = Array.from(text.matchAll(INLINE));
  for (const m of matches) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = m.index + m[0].length;
    if (m[2] !== undefined) {
      parent.append(mdEl('code', m[2].replace(/^ (.*) $/, '$1')));
    } else if (m[3] !== undefined) {
      const href = safeURL(m[4]);
      if (href) inline(m[3], link(href, parent));
      else parent.append(document.createTextNode(m[0]));
    } else if (m[5] !== undefined || m[6] !== undefined) {
      inline(m[5] !== undefined ? m[5] : m[6], parent.appendChild(mdEl('strong')));
    } else if (m[7] !== undefined) {
      inline(m[7], parent.appendChild(mdEl('del')));
    } else if (m[8] !== undefined || m[9] !== undefined) {
      inline(m[8] !== undefined ? m[8] : m[9], parent.appendChild(mdEl('em')));
    } else if (m[10] !== undefined) {
      link(m[10], parent).textContent = m[10];
    }
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}
