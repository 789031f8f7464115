"""data/readers.py: every corpus format people have, in either direction, through one cleaning."""

import json
import unicodedata
import zipfile

import pytest

from data.corpus import CorpusError, CorpusNotFoundError
from data.languages import LanguagePair
from data.corpus_text import file_lines
from data.readers import hub_pairs, read_pairs, table_pairs

ES, NL, RU, JA = (LanguagePair("en", code) for code in ("es", "nl", "ru", "ja"))
# Sentence pairs in three scripts: Latin with diacritics, Cyrillic (cased), Japanese (no letter case).
SCRIPTS = {
    "nl": [("The café is closed.", "Het café is gesloten."), ("Go.", "Ga."), ("Tom is een één.", "Tom is één.")],
    "ru": [("I see Ivan.", "Я вижу Ивана."), ("It is cold.", "Холодно."), ("Tom left.", "Том ушёл.")],
    "ja": [("I am Tom.", "私はTomです。"), ("Thank you.", "ありがとう。"), ("It costs 500 yen.", "500円です。")],
}


def write_zip(path, members: dict[str, str]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def tatoeba_lines(pairs, attribution: bool = False) -> str:
    tail = "\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (CM) & #2 (x)" if attribution else ""
    return "".join(f"{english}\t{other}{tail}\n" for english, other in pairs)


@pytest.mark.parametrize("language", sorted(SCRIPTS))
def test_every_reader_gives_the_same_pairs_in_both_directions(tmp_path, language):
    pairs = SCRIPTS[language]
    code3 = {"nl": "nld", "ru": "rus", "ja": "jpn"}[language]
    forward, backward = LanguagePair("en", language), LanguagePair(language, "en")
    layouts = {  # the manythings layouts: a folder inside, the file at the root beside __MACOSX/, unzipped
        "nested": write_zip(tmp_path / f"{code3}-eng.zip", {f"{code3}-eng/_about.txt": "About.",
                                                            f"{code3}-eng/{code3}.txt": tatoeba_lines(pairs)}),
        "root": write_zip(tmp_path / "download.zip", {"_about.txt": "About.", f"__MACOSX/._{code3}.txt": "junk",
                                                      f"{code3}.txt": tatoeba_lines(pairs, attribution=True)}),
        "plain": tmp_path / f"{code3}.txt",
        "tsv": tmp_path / "pairs.tsv",
        "tsv with a header": tmp_path / "headed.tsv",
        "aligned": tmp_path / "corpus",
    }
    layouts["plain"].write_text(tatoeba_lines(pairs), encoding="utf-8")
    layouts["tsv"].write_text(tatoeba_lines(pairs), encoding="utf-8")  # source first: read with forward only
    layouts["tsv with a header"].write_text(f"{language}\ten\n" + "".join(f"{o}\t{e}\n" for e, o in pairs),
                                            encoding="utf-8")
    (tmp_path / "corpus.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (tmp_path / f"corpus.{language}").write_text("".join(o + "\n" for _, o in pairs), encoding="utf-8")
    for name, path in layouts.items():
        assert read_pairs(path, forward)[0] == pairs, name
        if name != "tsv":
            assert read_pairs(path, backward)[0] == [(o, e) for e, o in pairs], name


def test_a_hub_dataset_in_either_direction(tmp_path):
    folder = tmp_path / "hub_standin"
    folder.mkdir()
    rows = [{"translation": {"en": e, "ru": o}} for e, o in SCRIPTS["ru"]] + [{"translation": {"en": "", "ru": "x"}}]
    (folder / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    pairs, report = hub_pairs(str(folder), None, "train", LanguagePair("ru", "en"))
    assert list(pairs) == [(o, e) for e, o in SCRIPTS["ru"]] and report.bad == {"empty_side": 1}
    with pytest.raises(CorpusError, match=r"rows translate en/ru, not en/nl: set data.source_lang"):
        list(hub_pairs(str(folder), None, "train", NL)[0])


def test_a_download_of_another_language_is_refused_naming_both(tmp_path):
    archive = write_zip(tmp_path / "nld-eng.zip", {"nld.txt": tatoeba_lines(SCRIPTS["nl"])})
    with pytest.raises(CorpusError, match=r"nld-eng\.zip: holds English–Dutch \(nld\.txt\), not English→Spanish"):
        read_pairs(archive, ES)
    with pytest.raises(CorpusError, match=r"a Tatoeba download pairs English with one language, and Dutch→Russian"):
        read_pairs(archive, LanguagePair("nl", "ru"))
    empty = write_zip(tmp_path / "empty.zip", {"_about.txt": "About.", "__MACOSX/._x.txt": "junk"})
    with pytest.raises(CorpusError, match=r"empty\.zip holds no sentence-pair \.txt file"):
        list(file_lines(empty, NL))


def test_aligned_files_of_different_lengths_are_refused_naming_the_line(tmp_path):
    (tmp_path / "train.en").write_text("One.\nTwo.\nThree.\n", encoding="utf-8")
    (tmp_path / "train.nl").write_text("Een.\nTwee.\n", encoding="utf-8")
    with pytest.raises(CorpusError) as refused:
        read_pairs(tmp_path / "train", NL)
    assert str(refused.value) == ("train.en has 3 lines and train.nl 2: not aligned "
                                  "(line 3 of train.en has no partner)")
    (tmp_path / "train.nl").write_text("Een.\n\nDrie.\n", encoding="utf-8")  # an empty side: skipped, counted
    pairs, report = read_pairs(tmp_path / "train", NL)
    assert pairs == [("One.", "Een."), ("Three.", "Drie.")] and report.first_lines == {"empty_side": [2]}


def test_messy_file_loads_with_right_counts_and_report(tmp_path, caplog):
    decomposed = unicodedata.normalize("NFD", "Él está aquí.")  # not NFC
    lines = [
        "Go.\tVe.",
        "Hi.\tHola.\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM)",  # 3 columns
        "no tab at all",  # too few fields
        "a\tb\tc\td",  # too many: 4 columns
        "",  # a blank line: no pair, nothing lost, nothing said
        "Empty spanish.\t   ",  # empty side
        f"He is here.\t{decomposed}",
        "  Spaces around.  \t  Espacios.  ",
    ]
    path = tmp_path / "spa.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        pairs, report = read_pairs(path, ES)
    assert pairs == [("Go.", "Ve."), ("Hi.", "Hola."), ("He is here.", "Él está aquí."),
                     ("Spaces around.", "Espacios.")]
    assert report.bad == {"too_few_fields": 1, "too_many_fields": 1, "empty_side": 1}
    assert report.first_lines == {"too_few_fields": [3], "too_many_fields": [4], "empty_side": [6]}
    assert report.renormalized >= 1 and report.kept + report.skipped == len(lines) - 1
    assert report.reading == "spa.txt as tatoeba: column 1 'en' → column 2 'es'"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["spa.txt: 4 pairs kept, 3 lines skipped, 1 re-normalized to NFC; 1 with fewer fields than "
                        "columns (line 3); 1 with more fields than columns (a tab or comma inside a field?) (line 4); "
                        "1 with an empty source or target (line 6)"]  # said once, with the lines


@pytest.mark.parametrize("separator", ["\u2028", "\u0085", "\x0b", "\x0c", "\x1c", "\x1e"])
def test_only_a_newline_ends_a_record_and_blank_lines_never_stop_a_strict_read(tmp_path, separator):
    path = tmp_path / "pairs.tsv"
    path.write_text(f"en\tes\nhello.{separator}She said\tHola.{separator}Dijo\nGo.\tVe.\r\n\n\n", encoding="utf-8")
    pairs, report = read_pairs(path, ES, strict=True)
    assert pairs == [(f"hello.{separator}She said".strip(), f"Hola.{separator}Dijo".strip()), ("Go.", "Ve.")]
    aligned = tmp_path / "corpus"
    (tmp_path / "corpus.en").write_text(f"one{separator}two\nthree\n", encoding="utf-8")
    (tmp_path / "corpus.es").write_text("uno dos\ntres\n", encoding="utf-8")
    assert read_pairs(aligned, ES)[0] == [(f"one{separator}two", "uno dos"), ("three", "tres")]


def test_a_file_that_is_not_utf8_is_refused_at_its_byte_unless_its_encoding_is_named(tmp_path):
    archive = tmp_path / "spa-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("spa-eng/spa.txt", b"Go.\tVe.\nBad \xff byte.\tMal.\n")
    with pytest.raises(CorpusError, match=r"spa-eng\.zip:spa-eng/spa\.txt: not UTF-8 text \(byte 0xff at offset "
                                          r"12, line 2\): save it as UTF-8, or name its encoding \(data\.encoding="):
        read_pairs(archive, ES)
    cp1252 = tmp_path / "mine.tsv"
    cp1252.write_bytes("en\tes\nThe café.\tEl café.\nI’m here.\tEstoy aquí.\n".encode("cp1252"))
    with pytest.raises(CorpusError, match=r"mine\.tsv: not UTF-8 text \(byte 0xe9 at offset 13, line 2\)"):
        read_pairs(cp1252, ES)
    pairs, _ = read_pairs(cp1252, ES, encoding="cp1252")
    assert pairs == [("The café.", "El café."), ("I’m here.", "Estoy aquí.")]


@pytest.mark.parametrize("name", ["mine.TSV", "mine.tsv", "mine.txt", "mine"])
def test_a_table_is_read_in_the_order_its_header_names_whatever_its_name(tmp_path, name):
    path = tmp_path / name
    path.write_text("es\ten\nHola.\tHello.\nAdiós.\tBye.\n", encoding="utf-8")  # Spanish first
    pairs, report = read_pairs(path, ES)
    assert pairs == [("Hello.", "Hola."), ("Bye.", "Adiós.")]  # the header never a pair
    assert report.reading == f"{name} as tsv: column 2 'en' → column 1 'es', header skipped"
    assert read_pairs(path, LanguagePair("es", "en"))[0] == [("Hola.", "Hello."), ("Adiós.", "Bye.")]


def test_a_csv_is_read_with_its_quotes_and_a_header_of_language_names(tmp_path):
    path = tmp_path / "mine.CSV"
    path.write_text('id,Spanish,English\n1,"Hola, Tom.","Hello, Tom."\n2,"Dijo ""no"".","He said ""no""."\n'
                    '3,"Dos\nlíneas.",Two lines.\n', encoding="utf-8")
    pairs, report = read_pairs(path, ES)
    assert pairs == [("Hello, Tom.", "Hola, Tom."), ('He said "no".', 'Dijo "no".'), ("Two lines.", "Dos\nlíneas.")]
    assert report.reading == "mine.CSV as csv: column 3 'en' → column 2 'es', header skipped"


def test_more_than_two_columns_need_their_names_and_a_tab_inside_a_field_is_counted(tmp_path, caplog):
    path = tmp_path / "mine.tsv"
    path.write_text("7\tHello.\tHola.\n8\tBye.\tAdiós.\n9\tA\ttab.\tUn tab.\n", encoding="utf-8")
    with pytest.raises(CorpusError) as refused:
        read_pairs(path, ES)
    assert str(refused.value).startswith("mine.tsv has 3 columns ('7', 'Hello.', 'Hola.'): name them with a header "
                                         "line of language codes or data.columns=[...]")
    with caplog.at_level("WARNING"):
        pairs, report = read_pairs(path, ES, columns=["id", "en", "es"])
    assert pairs == [("Hello.", "Hola."), ("Bye.", "Adiós.")] and report.first_lines == {"too_many_fields": [3]}
    assert "line 3" in caplog.records[-1].getMessage()
    with pytest.raises(CorpusError, match=r"mine\.tsv, line 3: more fields than columns .* \(data\.strict=true"):
        read_pairs(path, ES, columns=["id", "en", "es"], strict=True)
    with pytest.raises(CorpusError, match=r"data\.columns names the columns id, en, fr, none of them es"):
        read_pairs(path, ES, columns=["id", "en", "fr"])


def test_auto_tells_a_tatoeba_file_by_its_attribution_and_a_named_format_is_obeyed(tmp_path):
    path = tmp_path / "mine.txt"  # Spanish→English training: English still comes first in a Tatoeba file
    path.write_text(tatoeba_lines(SCRIPTS["nl"], attribution=True), encoding="utf-8")
    pairs, report = read_pairs(path, LanguagePair("nl", "en"))
    assert pairs == [(o, e) for e, o in SCRIPTS["nl"]] and report.format == "tatoeba"
    two_columns = tmp_path / "pairs.tsv"
    two_columns.write_text(tatoeba_lines(SCRIPTS["nl"]), encoding="utf-8")
    assert read_pairs(two_columns, LanguagePair("nl", "en"))[0] == SCRIPTS["nl"]  # a table: source then target
    assert read_pairs(two_columns, LanguagePair("nl", "en"), corpus_format="tatoeba")[0] == [
        (o, e) for e, o in SCRIPTS["nl"]]


def test_parse_counts_on_real_corpus(full_datamodule):
    report = full_datamodule.report
    lines = list(file_lines(full_datamodule._corpus(), ES))
    assert report.kept + report.skipped == len(lines) == 116_668
    assert next(table_pairs(lines[:5], "tatoeba", ES, "spa.txt")[0]) == ("Go.", "Ve.")
    assert next(table_pairs(lines[:5], "tatoeba", LanguagePair("es", "en"), "spa.txt")[0]) == ("Ve.", "Go.")


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "spa.txt"
    path.write_bytes("\ufeffWait!\t¡Espera!\nGo.\tVe.\n".encode())
    assert read_pairs(path, ES)[0] == [("Wait!", "¡Espera!"), ("Go.", "Ve.")]


def test_files_that_are_not_this_corpus_are_refused_naming_them(tmp_path):
    truncated = write_zip(tmp_path / "spa-eng.zip", {"spa-eng/spa.txt": "Go.\tVe.\n" * 1000})
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(CorpusError, match=r"spa-eng\.zip: not a readable zip archive"):
        read_pairs(truncated, ES)
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 50)
    with pytest.raises(CorpusError, match=r"model\.bin: not a text file"):
        read_pairs(binary, ES)
    prose = tmp_path / "notes.txt"  # text, but mostly not pairs: more malformed lines than pairs
    prose.write_text("Go.\tVe.\n" + "Just a line of prose.\n" * 2, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"notes\.txt: 2 malformed lines against 1 pairs of English–Spanish read "
                                          r"as tsv: not a sentence-pair corpus"):
        read_pairs(prose, ES)
    with pytest.raises(CorpusNotFoundError, match="does not exist"):
        read_pairs(tmp_path / "missing.txt", ES)


TMX = """<?xml version="1.0" encoding="{encoding}"?>
<!DOCTYPE tmx SYSTEM "tmx14.dtd">
<tmx version="1.4">
  <header creationtool="test" srclang="en-US" segtype="sentence" o-tmf="x" adminlang="en" datatype="plaintext"/>
  <body>
    <tu tuid="1">
      <tuv xml:lang="en-US"><seg>Press <bpt i="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now.</seg></tuv>
      <tuv xml:lang="es-ES"><seg>Pulse <hi>Guardar</hi> ahora.</seg></tuv>
    </tu>
    <tu>
      <tuv xml:lang="EN_gb"><seg>Open the
        file.<ph x="1">&lt;br/&gt;</ph></seg></tuv>
      <tuv lang="es"><seg>Abra el archivo.</seg></tuv>
    </tu>
    <tu>
      <tuv xml:lang="en"><seg>Only English here.</seg></tuv>
      <tuv xml:lang="de-DE"><seg>Nur Deutsch.</seg></tuv>
    </tu>
    <tu><tuv xml:lang="en"><seg>Café</seg></tuv><tuv xml:lang="es-MX"><seg>Cafe\u0301</seg></tuv></tu>
  </body>
</tmx>
"""
TMX_PAIRS = [("Press Save now.", "Pulse Guardar ahora."), ("Open the file.", "Abra el archivo."), ("Café", "Café")]


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16"])
def test_a_translation_memory_is_read_by_language_with_regions_its_tags_dropped(tmp_path, encoding, caplog):
    path = tmp_path / "memory.tmx"  # UTF-16 with its byte-order mark, as several CAT tools write it
    path.write_bytes(TMX.format(encoding=encoding).encode(encoding.lower()))
    pairs, report = read_pairs(path, LanguagePair("en", "es"))
    assert pairs == TMX_PAIRS and report.format == "tmx" and report.renormalized == 1
    assert report.reading == "memory.tmx as tmx: xml:lang en → es, 3 inline tags dropped"
    assert report.bad == {"missing_language": 1} and report.first_lines == {"missing_language": [15]}
    assert "without both languages (line 15)" in caplog.text
    backwards, _ = read_pairs(path, LanguagePair("es", "en"))  # either direction
    assert backwards == [(target, source) for source, target in TMX_PAIRS]
    found = tmp_path / "memory.xml"  # auto: by its content, whatever its name
    found.write_bytes(path.read_bytes())
    assert read_pairs(found, LanguagePair("en", "es"))[0] == TMX_PAIRS


def test_a_memory_without_the_pair_or_not_well_formed_is_refused_in_one_line(tmp_path):
    path = tmp_path / "memory.tmx"
    path.write_text(TMX.format(encoding="UTF-8"), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"memory.tmx: its translation units hold de, en, es, not both en and fr: "):
        read_pairs(path, LanguagePair("en", "fr"))
    broken = tmp_path / "broken.tmx"
    broken.write_text(TMX.format(encoding="UTF-8").replace("</tu>\n    <tu>", "</tu>\n    <tu", 1), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"broken.tmx: not a well-formed TMX file at line 11, column \d+: "):
        read_pairs(broken, LanguagePair("en", "es"))
    strict = tmp_path / "strict.tmx"
    strict.write_text(TMX.format(encoding="UTF-8"), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"strict.tmx, line 15: a translation unit without both languages"):
        read_pairs(strict, LanguagePair("en", "es"), strict=True)


def test_a_utf16_table_is_read_with_its_encoding_named_and_only_newlines_end_its_lines(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_bytes("en\tes\nOne\u2028line.\tUna línea.\nGo.\tVe.".encode("utf-16"))
    assert read_pairs(path, ES, encoding="utf-16")[0] == [("One\u2028line.", "Una línea."), ("Go.", "Ve.")]
