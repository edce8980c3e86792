"""A Hugging Face Hub id (`meta-llama/Llama-3.1-8B`) as MODEL: its config.json.

Fetched with huggingface_hub (the optional `hub` extra: pip install
'archcalc[hub]'), which keeps a local cache: a config fetched once is read
from the cache afterwards, without the network (HF_HUB_OFFLINE=1: never).  Only
config.json is downloaded, never the weights.  Every failure is one line
saying what to do (install the extra, log in for a gated model, check the id,
connect once to fill the cache).
"""

from __future__ import annotations

import re
from pathlib import Path

from archcalc.errors import InputError

# owner/name as the Hub allows them (huggingface_hub's validate_repo_id): letters, digits, - _ .
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def looks_like_hub_id(ref: str) -> bool:
    return bool(HUB_ID.match(ref)) and not ref.endswith((".json", ".yaml", ".yml")) and ".." not in ref


def hub_config(repo_id: str, revision: str | None = None) -> Path:
    """The local path of `repo_id`'s config.json, from the cache or downloaded into it."""
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
        from huggingface_hub.errors import (
            EntryNotFoundError,
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise InputError(repo_id, None, "no such file; to read a Hugging Face Hub id, pip install "
                                        "'archcalc[hub]' (huggingface_hub)") from None
    import logging

    quiet = logging.getLogger("huggingface_hub")  # its retry warnings would be a second line
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        cached = try_to_load_from_cache(repo_id, "config.json", revision=revision)
        if isinstance(cached, str):  # fetched before: no network needed
            return Path(cached)
        return Path(hf_hub_download(repo_id, "config.json", revision=revision, etag_timeout=5))
    except GatedRepoError:
        raise InputError(repo_id, None, "a gated model: accept its license on huggingface.co, then "
                                        "`hf auth login` (or set HF_TOKEN)") from None
    except RepositoryNotFoundError:
        raise InputError(repo_id, None, "no such model on the Hub (or it is private: log in with `hf auth "
                                        "login`)") from None
    except RevisionNotFoundError:
        raise InputError(repo_id, None, f"no revision {revision!r}") from None
    except LocalEntryNotFoundError:  # before EntryNotFoundError: it is one
        raise InputError(repo_id, None, "not in the local Hugging Face cache, and the Hub cannot be reached "
                                        "(offline, or HF_HUB_OFFLINE=1): connect once to cache its config.json"
                         ) from None
    except EntryNotFoundError:
        raise InputError(repo_id, None, "the repository has no config.json") from None
    except (OSError, ValueError) as e:  # network errors, a bad cache folder, an id the Hub refuses
        raise InputError(repo_id, None, f"cannot fetch config.json: {str(e).splitlines()[0][:200]}") from None
    finally:
        quiet.setLevel(level)
