"""Filling a real admin form the way a browser would: the page's own fields with the values it shows
(inputs, checked boxes, selected options, text areas), then the test's changes on top. A walk of the admin
(tests/audit/test_admin_walk.py) posts what the page offers rather than a hand-kept copy of each form."""

from __future__ import annotations

from html.parser import HTMLParser

SKIPPED_TYPES = frozenset({"submit", "button", "file", "image", "reset"})


class _FormFields(HTMLParser):
    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.values: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and a.get("type", "text") not in SKIPPED_TYPES:
            if a.get("type") in ("checkbox", "radio"):
                if "checked" in a:
                    self.values.setdefault(name, []).append(a.get("value") or "on")
            else:
                self.values.setdefault(name, []).append(a.get("value") or "")
        elif tag == "select" and name:
            self._select = name
            self.values.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.values[self._select].append(a.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_data(self, data):
        if self._textarea:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            # A browser drops the one newline right after <textarea>.
            self.values[self._textarea] = ["".join(self._text).removeprefix("\n")]
            self._textarea = None


def form_values(html: str, form_id: str) -> dict[str, list[str]]:
    parser = _FormFields(form_id)
    parser.feed(html)
    return parser.values


def filled(client, page_url: str, form_id: str, changes: dict) -> dict:
    """What a browser would post from the page at `url` after the user typed `changes`."""
    page = client.get(page_url)
    assert page.status_code == 200, (page_url, page.status_code)
    values = form_values(page.content.decode(), form_id)
    assert values, f"no form {form_id} on {page_url}"
    values.pop("csrfmiddlewaretoken", None)
    for name, value in changes.items():
        values[name] = value if isinstance(value, list) else ["" if value is None else str(value)]
    return values
