"""The live store: last record wins, deletions, live versions, and documents reassembled."""

from __future__ import annotations

from conftest import chunk_record, store_of

from exporter.checks.normalize import fold_with_map
from exporter.checks.store import ChunkStore
from exporter.records.decode import decode_chunk
from exporter.records.schema import ChunkDeletion


def test_last_record_per_chunk_wins() -> None:
    store = store_of(chunk_record("d", 0, "old text"), chunk_record("d", 0, "new text"))
    chunk = store.chunk("d#0")
    assert chunk is not None and chunk.text == "new text"
    assert store.chunk_count == 1


def test_deleting_every_chunk_removes_the_document() -> None:
    store = store_of(chunk_record("d", 0, "a"), chunk_record("d", 1, "b"))
    store.apply(ChunkDeletion("d#0"))
    assert store.live_version("d") == "v1"
    store.apply(ChunkDeletion("d#1"))
    assert store.live_version("d") is None
    assert store.document("d") is None
    assert store.document_count == 0


def test_deleting_an_unknown_chunk_is_harmless() -> None:
    store = store_of(chunk_record("d", 0, "a"))
    store.apply(ChunkDeletion("nope"))
    assert store.chunk_count == 1


def test_live_version_follows_the_latest_write_and_survives_deletion_of_old_chunks() -> None:
    store = store_of(
        chunk_record("d", 0, "a"),
        chunk_record("d", 1, "b"),
        chunk_record("d", 0, "A", doc_version="v2", chunk_id="d#v2-0"),
    )
    assert store.live_version("d") == "v2"
    store.apply(ChunkDeletion("d#0"))
    store.apply(ChunkDeletion("d#1"))
    assert store.live_version("d") == "v2"
    store.apply(ChunkDeletion("d#v2-0"))
    assert store.live_version("d") is None


def test_live_version_falls_back_when_the_newest_version_is_withdrawn() -> None:
    store = store_of(chunk_record("d", 0, "a"), chunk_record("d", 1, "B", doc_version="v2"))
    store.apply(ChunkDeletion("d#1"))
    assert store.live_version("d") == "v1"


def test_view_places_chunks_at_their_offsets_and_collapses_overlaps() -> None:
    text = "The first sentence. The second sentence. The third one."
    store = store_of(
        chunk_record("d", 1, text[15:40], doc_offset=15),
        chunk_record("d", 0, text[0:25], doc_offset=0),
        chunk_record("d", 2, text[41:], doc_offset=41),
    )
    view = store.document("d")
    assert view is not None and view.has_doc_offsets
    assert view.text == text
    held = view.chunks_holding(text.index("second"), text.index("second") + 6)
    assert [p.chunk.chunk_id for p in held] == ["d#1"]
    both = view.chunks_holding(16, 24)
    assert sorted(p.chunk.chunk_id for p in both) == ["d#0", "d#1"]
    assert view.chunks_holding(20, 45) == []


def test_view_fills_gaps_between_chunks_with_spaces() -> None:
    store = store_of(
        chunk_record("d", 0, "One.", doc_offset=0), chunk_record("d", 1, "Two.", doc_offset=6)
    )
    view = store.document("d")
    assert view is not None and view.text == "One.  Two."


def test_view_without_offsets_joins_chunks_in_ordinal_order() -> None:
    store = store_of(chunk_record("d", 1, "Second."), chunk_record("d", 0, "First."))
    view = store.document("d")
    assert view is not None and not view.has_doc_offsets
    assert view.text == "First.\nSecond."
    assert [p.start for p in view.placements] == [0, 7]


def test_view_falls_back_to_joining_when_overlapping_chunks_disagree() -> None:
    store = store_of(
        chunk_record("d", 0, "abcdef", doc_offset=0), chunk_record("d", 1, "XYZ", doc_offset=3)
    )
    view = store.document("d")
    assert view is not None and not view.has_doc_offsets
    assert view.text == "abcdef\nXYZ"


def test_view_holds_only_the_live_version_and_is_rebuilt_after_a_change() -> None:
    store = store_of(chunk_record("d", 0, "old words"))
    assert store.document("d") is not None
    store.apply(decode_chunk(chunk_record("d", 0, "new words", doc_version="v2", chunk_id="d#n")))
    view = store.document("d")
    assert view is not None
    assert view.version == "v2" and view.text == "new words"


def test_cached_views_are_bounded_least_recently_used_first() -> None:
    one = store_of(chunk_record("x", 0, "x" * 100)).document("x")
    assert one is not None
    store = ChunkStore(max_view_bytes=int(one.nbytes * 2.5))
    for n in range(5):
        store.apply(decode_chunk(chunk_record(f"d{n}", 0, "x" * 100)))
    first = store.document("d0")
    store.document("d1")
    assert store.document("d0") is first, "a cached view is reused"
    store.document("d2")  # a third does not fit: the least recently used (d1) goes
    assert store.view_bytes == 2 * one.nbytes
    assert store.document("d0") is first
    huge = ChunkStore(max_view_bytes=10)
    huge.apply(decode_chunk(chunk_record("big", 0, "y" * 1000)))
    assert huge.document("big") is not None, "a document larger than the bound is still viewed"


def test_a_deleted_document_gives_back_its_view_s_memory() -> None:
    store = ChunkStore()
    store.apply(decode_chunk(chunk_record("d", 0, "x" * 100)))
    store.document("d")
    assert store.view_bytes > 100
    store.apply(ChunkDeletion("d#0"))
    assert store.view_bytes == 0 and store.document("d") is None


def test_a_changed_document_s_view_is_rebuilt_from_the_stale_one() -> None:
    store = ChunkStore()
    for n in range(3):
        store.apply(decode_chunk(chunk_record("d", n, f"Chunk {n} says \u201cthirty days\u201d.")))
    before = store.document("d")
    store.apply(decode_chunk(chunk_record("d", 1, "Chunk 1 now says sixty days.")))
    after = store.document("d")
    assert before is not None and after is not None and after is not before
    assert after.text == "\n".join(
        ["Chunk 0 says \u201cthirty days\u201d.", "Chunk 1 now says sixty days.",
         "Chunk 2 says \u201cthirty days\u201d."]
    )  # fmt: skip
    assert after.folded.text == fold_with_map(after.text).text
    assert store.view_bytes == after.nbytes, "the stale view's memory is given back"


def test_text_crafted_to_fold_badly_is_counted_at_what_it_costs() -> None:
    plain = store_of(chunk_record("p", 0, "fi" * 10_000)).document("p")
    crafted = store_of(chunk_record("c", 0, "\ufb01a" * 10_000)).document("c")
    assert plain is not None and crafted is not None
    assert crafted.nbytes > 3 * plain.nbytes, "its offset map has a piece per ligature"
