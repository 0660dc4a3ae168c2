"""Splitting a long value into overlapping passages for the chunk leg."""


def split(text: str, size: int, overlap: int) -> list[tuple[int, str]]:
    """Passages of about `size` characters, each starting `overlap` before the last one ended.

    Cuts fall on whitespace where one is near, so a passage does not end mid-word.
    Returns (start offset, passage) pairs covering the whole text.
    """
    overlap = min(overlap, size // 2)
    passages = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        passages.append((start, text[start:end]))
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
        # Start on a word boundary as well.
        space = text.find(" ", start, end)
        start = space + 1 if space != -1 else start
    return passages
