"""The deterministic pieces of the write path: fake embedder, terms, chunks, sensitivity."""

import re
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.ingest import sensitivity
from retrieval.language import chunking, text
from retrieval.providers.embedders import FakeEmbedder, build


def test_fake_embedder_is_deterministic_normalised_and_knows_shared_wording():
    embedder = FakeEmbedder(384)
    vectors = embedder.embed_many(["the cat sat on the mat", "The cat sat on a mat", "quarterly revenue report"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > 0.8 and abs(unrelated) < 0.2
    # One text alone embeds exactly as it does inside a batch (no bleed across texts).
    assert np.allclose(embedder.embed("quarterly revenue report"), vectors[2])
    assert embedder.model_name == "fake-ngram-384"


def test_embedder_selection_refuses_unknown_models():
    from django.core.exceptions import ImproperlyConfigured

    assert build("fake-ngram-64").dim == 64
    with pytest.raises(ImproperlyConfigured, match="unknown embedding model"):
        build("word2vec")


def test_terms_are_lowercased_and_stemmed_and_keys_split_at_humps():
    assert text.value_terms("Running runs RAN; the Dogs") == {"run": 2, "ran": 1, "the": 1, "dog": 1}
    assert text.key_terms("user.preferredEditor_v2") == {"user": 1, "prefer": 1, "editor": 1, "v": 1, "2": 1}
    assert text.key_terms("HTTPServerConfig") == {"http": 1, "server": 1, "config": 1}


@given(st.text(alphabet=st.characters(max_codepoint=0x17F)) | st.text())
def test_a_texts_words_are_the_runs_of_word_characters_whatever_its_characters(value):
    # ASCII texts take a faster path than the regex every term was stored by: the terms must not change.
    assert text.tokens(value) == re.findall(r"\w+", value.lower())


@given(st.lists(st.lists(st.text(min_size=1), max_size=8), max_size=6))
def test_remembered_stems_are_the_stemmers_however_full_the_memory(texts):
    # Stems are kept by word between writes (a dict lookup is a tenth of the stemmer's own cache): a text's stems are
    # the stemmer's whether its words were known, new, or the memory was emptied for being full meanwhile (a memory of
    # a few words here, so that it is).
    with mock.patch.object(text, "_STEMS_HELD", 5):
        text._STEMS.clear()
        for words in texts + texts:
            assert text.stems(words) == text._stemmer.stemWords(words)
            assert len(text._STEMS) <= text._STEMS_HELD + 8  # full, it is emptied before a text's words go in


def test_the_remembered_stems_are_emptied_once_full(monkeypatch):
    monkeypatch.setattr(text, "_STEMS_HELD", 3)
    text._STEMS.clear()
    assert text.stems(["running", "dogs", "cats", "ran"]) == ["run", "dog", "cat", "ran"]
    assert text.stems(["walked"]) == ["walk"]
    assert text._STEMS == {"walked": "walk"}


def test_numbers_are_their_own_stems_and_never_crowd_the_words_out(monkeypatch):
    # Numbered keys (m0..m999999) brought a new word nearly every row: the memory filled and was emptied over and
    # over, and every word was stemmed again after each time.
    monkeypatch.setattr(text, "_STEMS_HELD", 3)
    text._STEMS.clear()
    assert text.stems(["running", "dogs"]) == ["run", "dog"]
    for number in range(10):
        assert text.stems(["m", str(number), "dogs"]) == ["m", str(number), "dog"]
    assert text._STEMS == {"running": "run", "dogs": "dog", "m": "m"}


def test_chunks_cover_the_value_with_overlap_on_word_boundaries():
    value = " ".join(f"word{i}" for i in range(400))
    passages = chunking.split(value, 200, 40)
    assert passages[0][0] == 0 and passages[-1][1].endswith("word399")
    for (start, passage), (next_start, _) in zip(passages, passages[1:]):
        assert value[start:].startswith(passage) and len(passage) <= 200
        assert next_start < start + len(passage)  # overlap
        assert value[next_start - 1] == " "  # starts on a word
    covered = set()
    for start, passage in passages:
        covered.update(range(start, start + len(passage)))
    assert covered >= set(range(len(value)))


# Format-valid fakes of each kind of secret: stated in prose, the formats detect-secrets knows, OpenAI/Anthropic
# keys as issued today, and quoted high-entropy strings.
SECRETS = [
    "the wifi password: correct-horse-battery",
    "Stripe live key sk_live_4eC39HqLyjWDarjtT1zdp7dc for billing",
    "restricted key rk_live_51HxYz0AbCdEfGhIjKlMnOpQ",
    "bot token xoxb-1234567890-0987654321-abcdefghijklmnopqrstuvwx",
    "alerts go to https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/abcdefghijklmnopqrstuvwx",
    "deploy with ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "CI uses glpat-abcdefghij0123456789",
    "AKIAIOSFODNN7EXAMPLE is the access key id",
    'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "Twilio account ACa1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4",
    "the app connects to postgres://admin:s3cretpass@db.internal:5432/app",
    "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
    "my key is sk-proj-abcdefghijklmnopqrstuvwx",  # no capital, no digit: not key-shaped, still a key
    "claude key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
    'signing value "q8Xz3LmP0vR7tY2wK9nB5cF1hJ6dG4sA" in the vault',
    # Assigned unquoted to a secret-named variable, as in an env file or a shell.
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "DB_PASSWORD=hunter2hunter2",
    "stripe:\n  api_key: 9fK2mQ7xL4pR8tW1",
    # Split at its prefix.
    "Stripe live key sk_live_ 4eC39HqLyjWDarjtT1zdp7dc for billing",
]


@pytest.mark.parametrize(
    "value,reason",
    [
        ("my card is 4111 1111 1111 1111, exp 09/29", "card_number"),
        ("SSN 123-45-6789 on file", "ssn"),
        ("Her PIN is 4821", "pin"),
        *[(secret, "credential") for secret in SECRETS],
    ],
)
def test_high_sensitivity_values_are_detected(value, reason):
    assert sensitivity.detect(value) == reason
    assert sensitivity.effective("low", value) == ("high", reason)


@pytest.mark.parametrize(
    "value",
    [
        "call me at 555-123-4567",
        "order 4111 1111 1111 1112 shipped",  # fails the Luhn check
        "the pin of the map is in Berlin",
        "password reset emails go out hourly",
        "invoice 2026-05-01 total 1234",
        "Commit 3f2a9cbd81e4a7f0c2d5e8b1a4c7f0d3e6b9a2c5 deployed to production",  # hex ids are no secrets
        "Request id 123e4567-e89b-12d3-a456-426614174000 failed twice",
        "See https://docs.python.org/3/library/re.html for the details",
        "internationalization is handled by the frontend team",
        "web-app v4.2.3 deployed by Jonas Berg at 10:42",
        "the API key rotation happens monthly",
        "The order ID is ORD-2026-000123456, shipped Tuesday",
        "Base64 of 'hello' is aGVsbG8=",
        # Markup with a link and quoted words: no quoted string is key-shaped.
        '</script><h1 id="injected">owned</h1><a href="https://attacker.test">log in again</a>',
        "max_tokens=4096 and token_budget: 8000000",  # numbers assigned to a secret-ish name are settings
        "sort_key = created_at for the export",
        "the secret: we meet at noon",
    ],
)
def test_ordinary_values_are_not_flagged(value):
    assert sensitivity.detect(value) is None
    assert sensitivity.effective("medium", value) == ("medium", None)


@pytest.mark.parametrize(
    "texts",
    [
        ("the wifi password", ": correct-horse-battery"),  # a stated secret's parts in two texts
        ("4111 1111", "1111 1111"),  # a card number's halves
        ("sk_live_", "4eC39HqLyjWDarjtT1zdp7dc"),  # a key's prefix and its body
        ("DB_PASSWORD", "=hunter2hunter2"),
    ],
)
def test_a_rows_texts_are_judged_apart(texts):
    """A row's texts are scanned in one pass, but nothing found spans two of them."""
    assert sensitivity.effective("low", *texts) == ("low", None)
    assert sensitivity.effective("low", "".join(texts)) == ("high", sensitivity.detect("".join(texts)))
