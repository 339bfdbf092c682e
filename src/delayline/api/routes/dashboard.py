"""``/ui``: the dashboard, and ``/ui/manager``, the Manager (groups); each one page of
plain HTML and JavaScript that reads the other routes."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from delayline.api.middleware import TOKEN_COOKIE

#: The dashboard's page: HTML, CSS and JavaScript in one file, no build step.
DASHBOARD_HTML = (resources.files("delayline.api") / "dashboard.html").read_text(encoding="utf-8")
#: The Manager's page, alike.
MANAGER_HTML = (resources.files("delayline.api") / "manager.html").read_text(encoding="utf-8")
#: What both pages draw with.
CHARTS_JS = (resources.files("delayline.api") / "charts.js").read_text(encoding="utf-8")

router = APIRouter()


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
async def dashboard(token: str | None = None) -> Response:
    """The dashboard: one page, plain HTML and JavaScript, reading the other routes."""
    return _page("/ui", DASHBOARD_HTML, token)


@router.get("/ui/manager", response_class=HTMLResponse, include_in_schema=False)
async def manager(token: str | None = None) -> Response:
    """The Manager: the groups, their quotas, health and history; create one. Its
    reads and its write need the admin token."""
    return _page("/ui/manager", MANAGER_HTML, token)


@router.get("/ui/charts.js", include_in_schema=False)
async def charts() -> Response:
    """What the two pages draw with: plain JavaScript."""
    return Response(CHARTS_JS, media_type="text/javascript")


def _page(path: str, html: str, token: str | None) -> Response:
    if token is not None:
        # The middleware checked it: keep it in a cookie, and out of the address bar.
        moved = RedirectResponse(path, status_code=303)
        moved.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return moved
    return HTMLResponse(html)
