"""The admin dashboard: static files under /ui, and `GET /` sending the browser there; and
/redoc, the API reference, from the redoc script shipped in fastapi-offline.

The page is public (it holds no data); everything it shows comes from the API with the key the
operator signs in with. Its answers carry a strict Content-Security-Policy (scripts, styles and
requests only from this origin, no inline script or style) and refuse to be framed.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import RedirectResponse

router = APIRouter(include_in_schema=False)

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


DOCS_ASSETS_URL = "/docs-assets"  # swagger-ui and redoc scripts, styles and icon


@router.get("/redoc")
def redoc(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    page = get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{DOCS_ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{DOCS_ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )
    # Its security headers are the documentation pages' own (app.api.middleware.DocsPolicy).
    return Response(page.body, media_type="text/html; charset=utf-8")


def _asset(name: str) -> bytes | None:
    """Return the bytes of static/`name`, or None for anything not a file there."""
    if "/" in name or name.startswith(".") or not name:
        return None
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix not in MEDIA_TYPES:
        return None
    path = resources.files("app.ui").joinpath("static", name)
    if not path.is_file():
        return None
    return path.read_bytes()


def _serve(name: str) -> Response:
    content = _asset(name)
    if content is None:
        raise HTTPException(404, "no such file in the dashboard")
    media_type = MEDIA_TYPES[name[name.rfind(".") :]]
    return Response(content, media_type=media_type, headers=SECURITY_HEADERS)


@router.get("/")
def root() -> RedirectResponse:
    """Send a browser to the dashboard (relative, so it works behind a path prefix)."""
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui")
def ui_without_slash() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui/")
def ui_page() -> Response:
    return _serve("index.html")


@router.get("/ui/{name}")
def ui_file(name: str) -> Response:
    return _serve(name)
