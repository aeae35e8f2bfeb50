"""/docs and /redoc work on a mail host without internet: every script, style and icon they
load is served by spamsift itself, from the installed package."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def test_docs_and_redoc_load_every_asset_from_the_server_itself(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200, page
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text)
        assert any(asset.endswith(".js") for asset in assets), page
        for asset in assets:
            assert asset.startswith("/"), f"{page} loads {asset} from elsewhere"
            loaded = client.get(asset)
            assert loaded.status_code == 200, asset
            assert len(loaded.content) > 0, asset
        assert "cdn" not in html.text.lower(), page
        assert "fonts.googleapis" not in html.text, page
