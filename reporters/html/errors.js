// The first script of the memtool HTML report: every script error and every
// request the page's Content-Security-Policy refused is written on <html> as
// data-errors, where the browser test (or a reader with the inspector) finds it.
(function () {
  'use strict';
  var root = document.documentElement;
  var errors = [];
  function note(text) {
    errors.push(text);
    root.setAttribute('data-errors', errors.join(' | '));
  }
  window.addEventListener('error', function (e) {
    var what = e.target && (e.target.src || e.target.href);
    note(e.message || 'could not load ' + (what || 'a resource'));
  }, true);
  window.addEventListener('securitypolicyviolation', function (e) {
    note('refused ' + e.blockedURI + ' (' + e.violatedDirective + ')');
  });
})();
