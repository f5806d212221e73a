"""The daemons' one HTTP port (``fairshare.metrics_server.serve_http``): prometheus_client's own
exposition at /metrics only (text or OpenMetrics by Accept, gzip), a JSON /health that turns 503
when not serving, 404 elsewhere, and a bound on requests in flight (503 beyond it, at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
from aiohttp import web
from fairshare.metrics_server import HttpLimits, build_registry, serve_http
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class One(Collector):
    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("fairshare_test_value", "A value.", 42)


def test_paths_negotiation_health_and_the_bound_on_requests_in_flight() -> None:
    async def scenario() -> None:
        serving = {"status": "SERVING"}
        release = asyncio.Event()

        def routes(app: web.Application) -> None:
            async def slow(request: web.Request) -> web.Response:
                await release.wait()
                return web.Response(text="done")

            app.router.add_get("/slow", slow)

        server = await serve_http(
            build_registry(One()), "127.0.0.1", 0, lambda: dict(serving), routes,
            HttpLimits(max_concurrent=1),
        )  # fmt: skip
        base = f"http://{server.address}"
        try:
            async with aiohttp.ClientSession() as http:  # it asks for gzip; decompresses
                async with http.get(f"{base}/metrics") as answer:
                    assert answer.status == 200
                    assert answer.headers["Content-Type"].startswith("text/plain")
                    assert "fairshare_test_value 42.0" in await answer.text()
                accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
                async with http.get(f"{base}/metrics", headers=accept) as answer:
                    assert answer.headers["Content-Type"].startswith("application/openmetrics")
                    assert (await answer.text()).endswith("# EOF\n")
                async with http.get(f"{base}/metrics") as answer:
                    assert answer.headers.get("Content-Encoding") == "gzip"
                    assert "fairshare_test_value" in await answer.text()
                plain = {"Accept-Encoding": "identity"}
                async with http.get(f"{base}/metrics", headers=plain) as answer:
                    assert "Content-Encoding" not in answer.headers
                for path in ("/", "/metrics/", "/health/x", "/api/v1/state"):
                    async with http.get(f"{base}{path}") as answer:
                        assert answer.status == 404, path
                async with http.get(f"{base}/health") as answer:
                    assert answer.status == 200 and await answer.json() == serving
                serving["status"] = "NOT_SERVING"
                async with http.get(f"{base}/health") as answer:
                    assert answer.status == 503

                in_flight = asyncio.ensure_future(http.get(f"{base}/slow"))
                await asyncio.sleep(0.2)  # the slow request holds the only slot
                async with http.get(f"{base}/metrics") as answer:
                    assert answer.status == 503  # at once, not queued behind it
                release.set()
                answer = await in_flight
                assert answer.status == 200 and await answer.text() == "done"
                answer.release()
                async with http.get(f"{base}/metrics") as answer:
                    assert answer.status == 200
        finally:
            await server.close()

    asyncio.run(scenario())
