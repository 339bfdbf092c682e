"""``/ui``: the dashboard, one page of plain HTML and JavaScript that reads the other
routes."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from delayline.api.middleware import TOKEN_COOKIE

#: The dashboard's page: HTML, CSS and JavaScript in one file, no build step.
DASHBOARD_HTML = (resources.files("delayline.api") / "dashboard.html").read_text(encoding="utf-8")

router = APIRouter()


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
async def dashboard(token: str | None = None) -> Response:
    """The dashboard: one page, plain HTML and JavaScript, reading the other routes."""
    if token is not None:
        # The middleware checked it: keep it in a cookie, and out of the address bar.
        moved = RedirectResponse("/ui", status_code=303)
        moved.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return moved
    return HTMLResponse(DASHBOARD_HTML)
