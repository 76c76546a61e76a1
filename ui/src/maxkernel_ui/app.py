"""The ASGI app: pages over the run store, live fragments, and the one change a person can make, answering
a hitl run's open question (a CSRF-checked POST; the answer goes through the store, where the run's
strategy is waiting for it)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import secrets
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from markupsafe import Markup
from maxkernel_core.errors import StoreError
from maxkernel_core.store import RunStore
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import pages
from .live import Page, PageCache, Watcher
from .render import render
from .security import Access, Guard, same_origin

DETAIL_LIMIT = 4000


class UI:
    """One server's state: the store, the page watcher and cache, the access rules, the audit log."""

    def __init__(self, store: RunStore, access: Access, audit: Path | None = None) -> None:
        self.store, self.access, self.audit = store, access, audit
        self.watcher = Watcher(store.path)
        self.cache = PageCache()
        self.records = pages.RecordCache(store)
        # where a page's live fragment goes (its head is sent before the fragment is rendered): a marker no
        # text from the store can contain, since nobody knows it
        self.split = f"<!--{secrets.token_hex(16)}-->"

    def page(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(render(template, who=self._who(request), csrf=self.access.csrf, **values),
                            status_code=status)

    def missing(self, request: Request, exc: Exception) -> HTMLResponse:
        return self.page(request, "message.html", 404, title="Not found", message=str(exc), back="/")

    async def live_page(self, request: Request, key: str, fragment: str, view, template: str,
                        **values: Any) -> Response:
        """A live page (``template`` around the ``fragment`` of the page ``key``) or, for ``.../live`` and
        ``/fragments/...``, the fragment alone: rendered once per fingerprint for every client, gzipped once.
        The first request of a new fingerprint gets the page's head at once and the rest when rendered."""
        version = await self.watcher.current(key)
        fragment_key, page_key = (key, fragment, version), (key, template, version, self._who(request))

        def render_fragment():
            return self.cache.get(fragment_key, lambda: render(fragment, csrf=self.access.csrf, **view()))

        if request.url.path.endswith("/live") or request.url.path.startswith("/fragments/"):
            return compressed(request, await render_fragment())
        if self.cache.has(page_key):
            return compressed(request, await self.cache.get(page_key, str))
        head, tail = render(template, who=self._who(request), csrf=self.access.csrf, version=version,
                            live=Markup(self.split), **values).split(self.split)

        async def body():
            yield head.encode()
            live = await render_fragment()
            yield live.raw
            yield tail.encode()
            await self.cache.put(page_key, head + live.text + tail)

        return StreamingResponse(body(), media_type="text/html; charset=utf-8")

    # --- pages ---------------------------------------------------------------

    async def runs(self, request: Request) -> Response:
        q, key = _runs_filters(request)
        view = pages.runs_view(self.store, **q) if request.url.path == "/" else {}
        query = urllib.parse.urlencode({k: v for k, v in q.items() if v})
        return await self.live_page(request, key, "_runs_live.html", lambda: self._runs(q),
                                    "runs.html", query=query, **view)

    def _runs(self, q: dict[str, str]) -> dict[str, Any]:
        view = pages.runs_view(self.store, **q)
        return {**view, "waiting": [r for r in view["runs"] if r["waiting"]]}

    async def run(self, request: Request) -> Response:
        try:
            run = self.store.get_run(request.path_params["run_id"])
        except StoreError as exc:
            return self.missing(request, exc)
        return await self.live_page(request, f"run:{run.id}", "_run_live.html",
                                    lambda: pages.run_view(self.store, run.id, self.records), "run.html", run=run)

    async def candidate(self, request: Request) -> Response:
        try:
            view = pages.candidate_view(self.store, request.path_params["run_id"], request.path_params["cand_id"])
        except StoreError as exc:
            return self.missing(request, exc)
        if view is None:
            return self.missing(request, LookupError(f"no candidate {request.path_params['cand_id']} in this run"))
        return self.page(request, "candidate.html", **view)

    async def compare(self, request: Request) -> Response:
        a, b = request.query_params.get("a", "").strip(), request.query_params.get("b", "").strip()
        view: dict[str, Any] = {"a": a, "b": b, "left": None, "error": None}
        if a and b:
            try:
                view.update(pages.compare_view(self.store, a, b, self.records))
            except StoreError as exc:
                view["error"] = str(exc)
        return self.page(request, "compare.html", **view)

    async def bench(self, request: Request) -> Response:
        try:
            bench = self.store.get_bench(request.path_params["bench_id"])
        except StoreError as exc:
            return self.missing(request, exc)
        return await self.live_page(request, f"bench:{bench['id']}", "_bench_live.html",
                                    lambda: pages.bench_view(self.store, bench["id"]), "bench.html", bench=bench)

    async def events(self, request: Request) -> Response:
        kind, ident = request.path_params["kind"], request.path_params.get("ident", "")
        key = _runs_filters(request)[1] if kind == "runs" else f"{kind}:{ident}"
        return StreamingResponse(self.watcher.events(key, request.is_disconnected), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    # --- the one change: answering an open question ------------------------------

    @staticmethod
    def _who(request: Request) -> str:
        return request.scope.get("state", {}).get("who", "local")

    async def answer(self, request: Request) -> Response:
        form = await request.form()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if form.get("csrf") != self.access.csrf or not same_origin(headers, headers.get("host", "")):
            return self.page(request, "message.html", 403, title="Refused",
                             message="this form did not come from this UI's own page (CSRF check); reload the page",
                             back="/")
        prompt = self.store.prompt(int(request.path_params["prompt_id"]))
        if prompt is None:
            return self.missing(request, LookupError("no such question"))
        back = f"/runs/{prompt['run_id']}#prompt"
        problem, choice, detail = _checked_answer(prompt, form)
        if problem:
            return self.page(request, "message.html", 400, title="Not answered", message=problem, back=back)
        who = self._who(request)
        if not self.store.answer_prompt(prompt["id"], choice, detail, who):
            now = self.store.prompt(prompt["id"])
            return self.page(request, "message.html", 409, title="Already answered", back=back,
                             message=f"this question was already {now['state']} ({now['who'] or 'the run moved on'})")
        self._audit(prompt, choice, detail, who)
        return RedirectResponse(f"/runs/{prompt['run_id']}", status_code=303)

    def _audit(self, prompt: dict[str, Any], choice: str, detail: str, who: str) -> None:
        line = (f"{dt.datetime.now().isoformat(timespec='seconds')} audit: run {prompt['run_id']} question "
                f"{prompt['id']} ({prompt['kind']}): {choice}{' ' + json.dumps(detail) if detail else ''} by {who}")
        print(line, file=sys.stderr, flush=True)
        if self.audit is not None:
            with contextlib.suppress(OSError), self.audit.open("a") as f:
                f.write(line + "\n")


def _runs_filters(request: Request) -> tuple[dict[str, str], str]:
    """The runs page's filters and its live key (the page and its event stream must name the same one)."""
    q = {k: request.query_params.get(k, "") for k in ("task", "strategy", "status")}
    return q, f"runs?{sorted(q.items())}"


def compressed(request: Request, page: Page) -> Response:
    """The page gzipped when the client takes it (compressed once, in the cache, not per request)."""
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(page.gzipped, media_type="text/html; charset=utf-8",
                        headers={"content-encoding": "gzip", "vary": "Accept-Encoding"})
    return Response(page.raw, media_type="text/html; charset=utf-8", headers={"vary": "Accept-Encoding"})


def _checked_answer(prompt: dict[str, Any], form) -> tuple[str | None, str, str]:
    """(problem, choice, detail): the choice must be one the question offers; an edit's parameters a JSON object."""
    choice = str(form.get("choice", ""))
    if choice not in prompt["body"].get("choices", {}).values():
        return f"choose one of {', '.join(prompt['body'].get('choices', {}).values())}", "", ""
    detail = str(form.get("parameters" if choice == "edit" else "feedback", "")).strip()
    if len(detail) > DETAIL_LIMIT:
        return f"the text is {len(detail)} characters; keep it under {DETAIL_LIMIT}", "", ""
    if choice == "edit":
        try:
            if not isinstance(json.loads(detail), dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return f"an edit's parameters must be a JSON object such as {{\"BLOCK_ROWS\": 64}} ({exc})", "", ""
    return None, choice, detail


def create_app(store: RunStore, access: Access, audit: Path | None = None):
    ui = UI(store, access, audit)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        ui.watcher.start()
        yield
        await ui.watcher.stop()

    routes = [
        Route("/", ui.runs), Route("/fragments/runs", ui.runs),
        Route("/runs/{run_id}", ui.run), Route("/runs/{run_id}/live", ui.run),
        Route("/runs/{run_id}/candidates/{cand_id}", ui.candidate),
        Route("/bench/{bench_id}", ui.bench), Route("/bench/{bench_id}/live", ui.bench),
        Route("/compare", ui.compare),
        Route("/events/{kind:str}", ui.events), Route("/events/{kind:str}/{ident}", ui.events),
        Route("/prompts/{prompt_id:int}", ui.answer, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("maxkernel_ui", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    guarded = Guard(app, access)
    guarded.ui = ui
    return guarded
