"""Every bundled hardware profile cites vendor material, and its usable memory
follows one convention (hardware/SOURCES.md).

A URL passes when its host is a vendor's (or a subdomain of one), when it is a
web.archive.org copy of a URL that passes, or when it is a GitHub URL of a
vendor organisation or of an inference-engine organisation (logs of usable
memory).  Everything else -- blogs, resellers, Q&A sites, spec aggregators,
placeholder domains -- fails, naming the profile and the URL.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from archcalc.hardware.profile import all_hardware

# Vendor hosts; a subdomain of one passes too (images.nvidia.com, rocm.docs.amd.com).
VENDOR_HOSTS = {
    "nvidia.com",
    "nvdam.widen.net",  # NVIDIA's asset library: datasheets and whitepapers
    "amd.com",
    "apple.com",
    "intel.com",
}
ARCHIVE_HOST = "web.archive.org"
GITHUB_VENDOR_ORGS = {"nvidia", "rocm", "amd", "apple", "intel"}
GITHUB_ENGINE_ORGS = {"vllm-project", "huggingface", "pytorch"}

# A public engine log: an issue or pull request of an engine organisation.
ENGINE_LOG = re.compile(r"^https://github\.com/([^/]+)/[^/]+/(issues|pull)/\d+/?$", re.IGNORECASE)

PROFILES = all_hardware()


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _github_org(url: str) -> str:
    parts = urlsplit(url).path.strip("/").split("/")
    return parts[0].lower() if parts and parts[0] else ""


def allowed(url: str) -> bool:
    if not url.startswith("https://") and not url.startswith("http://"):
        return False
    host = _host(url)
    if any(host == h or host.endswith("." + h) for h in VENDOR_HOSTS):
        return True
    if host == ARCHIVE_HOST:  # https://web.archive.org/web/<timestamp>/<original URL>
        m = re.match(r"^https?://web\.archive\.org/web/[0-9a-z_]+/(https?://.+)$", url, re.IGNORECASE)
        return bool(m) and allowed(m.group(1))
    if host == "github.com":
        return _github_org(url) in GITHUB_VENDOR_ORGS | GITHUB_ENGINE_ORGS
    return False


def _urls(profile):
    return [profile.source, *profile.sources]


@pytest.mark.parametrize("url, ok", [
    ("https://www.nvidia.com/en-us/data-center/h100/", True),
    ("https://images.nvidia.com/aem-dam/x.pdf", True),
    ("https://nvdam.widen.net/s/abc/datasheet", True),
    ("https://rocm.docs.amd.com/en/latest/x.html", True),
    ("https://web.archive.org/web/2024/https://www.amd.com/en/x.html", True),
    ("https://web.archive.org/web/2024/https://glennklockwood.com/garden/x", False),
    ("https://github.com/vllm-project/vllm/issues/1", True),
    ("https://github.com/ROCm/ROCm/blob/abc/docs/x.md", True),
    ("https://github.com/noonghunna/club-3090/issues/390", False),
    ("https://glennklockwood.com/garden/processors/h100", False),
    ("https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html", False),
    ("https://example-a.com/answer/76195232", False),
    ("https://notnvidia.com/x", False),
])
def test_allow_list_itself(url, ok):
    assert allowed(url) is ok


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_source_is_a_vendor_document_or_engine_log(profile):
    bad = [u for u in _urls(profile) if not allowed(u)]
    assert not bad, f"{profile.name}: not an allowed source: {bad}"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_primary_source_is_the_vendors_own(profile):
    """`source` is the vendor's datasheet/page, not an engine log."""
    assert not ENGINE_LOG.match(profile.source), f"{profile.name}: source is a log: {profile.source}"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_capacity_is_the_datasheet_figure_read_in_gib(profile):
    """memory_bytes is the datasheet 'N GB' read as N GiB (hardware/SOURCES.md)."""
    assert profile.memory_bytes % 2**30 == 0, f"{profile.name}: {profile.memory_bytes} is not whole GiB"


WITH_USABLE = [p for p in PROFILES if p.usable_memory_bytes is not None]


def test_some_profiles_carry_a_usable_total():
    assert WITH_USABLE


@pytest.mark.parametrize("profile", WITH_USABLE, ids=lambda p: p.name)
def test_usable_memory_cites_an_engine_log(profile):
    logs = [u for u in profile.sources
            if (m := ENGINE_LOG.match(u)) and m.group(1).lower() in GITHUB_ENGINE_ORGS]
    assert logs, f"{profile.name}: usable_memory_bytes without an engine issue/PR URL in sources"


@pytest.mark.parametrize("profile", WITH_USABLE, ids=lambda p: p.name)
def test_usable_memory_is_below_and_near_capacity(profile):
    """The CUDA total is below the physical capacity (driver reservation, ECC)
    but within 15% of it: a GB/GiB or MiB slip lands outside."""
    usable, total = profile.usable_memory_bytes, profile.memory_bytes
    assert usable <= total, f"{profile.name}: usable {usable} > capacity {total}"
    assert usable >= 0.85 * total, f"{profile.name}: usable {usable} < 85% of capacity {total}"
