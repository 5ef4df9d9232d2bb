(function () {
  'use strict';
  document.documentElement.classList.add('js');

  // Model panels: a model's name on any board opens its panel; Escape or Close shuts it.
  var opener = null;
  function closePanel() {
    var open = document.querySelector('.model-panel.open');
    if (!open) { return; }
    open.classList.remove('open');
    document.body.classList.remove('panel-open');
    if (opener) { opener.focus(); opener = null; }
  }
  function openPanel(id, from) {
    var panel = document.getElementById(id);
    if (!panel) { return; }
    closePanel();
    opener = from;
    panel.classList.add('open');
    document.body.classList.add('panel-open');
    panel.querySelector('h3').focus();
  }
  document.addEventListener('click', function (event) {
    var link = event.target.closest ? event.target.closest('a.model-link') : null;
    if (link) { event.preventDefault(); openPanel(link.getAttribute('href').slice(1), link); return; }
    if (event.target.closest && event.target.closest('.model-panel .close')) { closePanel(); }
  });
  document.addEventListener('keydown', function (event) { if (event.key === 'Escape') { closePanel(); } });
  Array.prototype.forEach.call(document.querySelectorAll('.model-panel .close'), function (b) { b.hidden = false; });
  // Sortable tables: every <th> with a <button> sorts its column (numbers by data-value).
  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute('data-value') ? cell.getAttribute('data-value') : cell.textContent.trim();
    if (!numeric) { return raw.toLowerCase(); }
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }
  function sortTable(table, th) {
    var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var index = headers.indexOf(th);
    var numeric = th.getAttribute('data-type') === 'num';
    var direction = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
    headers.forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', direction);
    var sign = direction === 'ascending' ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }   // missing values last either way
      if (y === null) { return -1; }
      if (numeric) { return sign * (x - y); }
      return sign * x.localeCompare(y);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    var status = document.getElementById('sort-status');
    if (status) { status.textContent = 'Sorted by ' + th.textContent.trim() + ', ' + direction; }
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var button = th.querySelector('button');
      if (button) { button.addEventListener('click', function () { sortTable(table, th); }); }
    });
  });

  // Category tabs (WAI-ARIA tabs pattern); without JavaScript every category is shown.
  var tablist = document.getElementById('category-tabs');
  if (!tablist) { return; }
  var tabs = Array.prototype.slice.call(tablist.querySelectorAll('[role=tab]'));
  function select(tab, focus) {
    tabs.forEach(function (t) {
      var on = t === tab;
      t.setAttribute('aria-selected', on ? 'true' : 'false');
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
    });
    if (focus) { tab.focus(); }
  }
  tabs.forEach(function (tab, i) {
    tab.addEventListener('click', function () {
      select(tab, false);
      if (history.replaceState) { history.replaceState(null, '', '#' + tab.getAttribute('aria-controls')); }
    });
    tab.addEventListener('keydown', function (event) {
      var next = null;
      if (event.key === 'ArrowRight') { next = tabs[(i + 1) % tabs.length]; }
      else if (event.key === 'ArrowLeft') { next = tabs[(i - 1 + tabs.length) % tabs.length]; }
      else if (event.key === 'Home') { next = tabs[0]; }
      else if (event.key === 'End') { next = tabs[tabs.length - 1]; }
      if (next) { event.preventDefault(); select(next, true); }
    });
  });
  tablist.hidden = false;
  var wanted = tabs.filter(function (t) { return '#' + t.getAttribute('aria-controls') === location.hash; });
  select(wanted.length ? wanted[0] : tabs[0], false);
})();
