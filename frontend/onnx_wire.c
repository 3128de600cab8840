/* frontend/onnx_wire.c: walks protobuf wire data before protobuf-c unpacks it, so that bytes protobuf-c would
 * crash on (messages nested thousands deep overflow its recursive unpack) are refused with a message. */
#include "frontend/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* reads a varint at *pos (at most 10 bytes, inside end); 0 when malformed */
static int read_varint(const uint8_t *buf, size_t end, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70 && *pos < end; shift += 7) {
    uint8_t b = buf[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return *out = v, 1;
  }
  return 0;
}

/* the field of d numbered id; protoc-c emits fields sorted by number */
static const ProtobufCFieldDescriptor *field_by_id(const ProtobufCMessageDescriptor *d, uint64_t id) {
  unsigned lo = 0, hi = d->n_fields;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    if (d->fields[mid].id == id) return &d->fields[mid];
    if (d->fields[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

typedef struct wire_frame {
  const ProtobufCMessageDescriptor *d;
  size_t end; /* where this message's bytes end */
} wire_frame;

/* One loop over the bytes with an explicit stack of the messages entered, so that the walk itself never
 * recurses: a message-typed length-delimited field pushes its descriptor, reaching its end pops it. */
pc_status ox_wire_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *d, int max_depth,
                        char *msg, size_t cap) {
  wire_frame *stack = malloc(sizeof *stack * (size_t)(max_depth + 1));
  if (!stack) return snprintf(msg, cap, "out of memory"), PC_ERR_NOMEM;
  int top = 0;
  stack[0] = (wire_frame){d, len};
  size_t pos = 0;
  pc_status st = PC_OK;
  const char *bad = NULL;
  for (;;) {
    while (top > 0 && pos == stack[top].end) top--;
    if (pos == stack[top].end) break; /* the outermost message ends the input */
    size_t end = stack[top].end;
    uint64_t tag, v;
    if (!read_varint(buf, end, &pos, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
      bad = "bad field tag";
      break;
    }
    int wt = (int)(tag & 7);
    if (wt == WIRE_VARINT) {
      if (!read_varint(buf, end, &pos, &v)) bad = "bad varint";
    } else if (wt == WIRE_I64 || wt == WIRE_I32) {
      size_t n = wt == WIRE_I64 ? 8 : 4;
      if (end - pos < n) bad = "fixed-size field runs past its message";
      else pos += n;
    } else if (wt == WIRE_LEN) {
      if (!read_varint(buf, end, &pos, &v) || v > end - pos) {
        bad = "length-delimited field runs past its message";
        break;
      }
      const ProtobufCFieldDescriptor *f = field_by_id(stack[top].d, tag >> 3);
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (top + 1 >= max_depth) {
          snprintf(msg, cap, "messages nested deeper than %d levels (at byte %zu, in %s.%s): refused", max_depth,
                   pos, stack[top].d->short_name, f->name);
          st = PC_ERR_RANGE;
          break;
        }
        stack[++top] = (wire_frame){f->descriptor, pos + (size_t)v};
      } else {
        pos += (size_t)v;
      }
    } else {
      bad = "unsupported wire type (groups or invalid)";
    }
    if (bad) break;
  }
  if (bad) {
    snprintf(msg, cap, "malformed protobuf at byte %zu (in %s): %s", pos, stack[top].d->short_name, bad);
    st = PC_ERR_PARSE;
  }
  free(stack);
  return st;
}

/* ---------------------------------------------------------------- large raw_data left out of the unpack */

typedef struct wire_out {
  uint8_t *b;
  size_t n, cap;
  int oom;
} wire_out;

static void out_put(wire_out *o, const uint8_t *p, size_t n) {
  if (o->oom) return;
  if (o->n + n > o->cap) {
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->n + n) cap *= 2;
    uint8_t *nb = realloc(o->b, cap);
    if (!nb) {
      o->oom = 1;
      return;
    }
    o->b = nb, o->cap = cap;
  }
  if (n) memcpy(o->b + o->n, p, n); /* p may be NULL when n is 0 */
  o->n += n;
}

static void out_varint(wire_out *o, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    b[n++] |= v ? 0x80 : 0;
  } while (v);
  out_put(o, b, n);
}

/* one field at *pos inside [.., end): its number, wire type, payload (LEN) and where it ends; the data was
 * checked by ox_wire_check, so a failure here only means "leave the model as it is" */
typedef struct wire_field {
  uint64_t id;
  int wt;
  size_t start, payload, len, end;
} wire_field;

static int next_field(const uint8_t *buf, size_t end, size_t *pos, wire_field *f) {
  uint64_t tag, v;
  f->start = *pos;
  if (!read_varint(buf, end, pos, &tag)) return 0;
  f->id = tag >> 3, f->wt = (int)(tag & 7);
  if (f->wt == WIRE_VARINT) {
    if (!read_varint(buf, end, pos, &v)) return 0;
  } else if (f->wt == WIRE_I64 || f->wt == WIRE_I32) {
    size_t n = f->wt == WIRE_I64 ? 8 : 4;
    if (end - *pos < n) return 0;
    *pos += n;
  } else if (f->wt == WIRE_LEN) {
    if (!read_varint(buf, end, pos, &v) || v > end - *pos) return 0;
    f->payload = *pos, f->len = (size_t)v;
    *pos += (size_t)v;
  } else {
    return 0;
  }
  f->end = *pos;
  return 1;
}

/* ONNX field numbers: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data */
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };

/* a TensorProto without its raw_data when that is large and given once; 1 when it was left out */
static int strip_tensor(const uint8_t *buf, size_t at, size_t end, size_t min_len, wire_out *o, ox_raw_ref *ref) {
  wire_field f;
  size_t pos = at, n_raw = 0;
  while (pos < end) {
    if (!next_field(buf, end, &pos, &f)) return 0;
    if (f.id == TENSOR_RAW_DATA && f.wt == WIRE_LEN) n_raw++, *ref = (ox_raw_ref){buf + f.payload, f.len};
  }
  if (n_raw != 1 || ref->len < min_len) { /* a repeated raw_data: the last one wins, left to protobuf-c */
    *ref = (ox_raw_ref){NULL, 0};
    out_put(o, buf + at, end - at);
    return 0;
  }
  for (pos = at; pos < end;) {
    next_field(buf, end, &pos, &f);
    if (!(f.id == TENSOR_RAW_DATA && f.wt == WIRE_LEN)) out_put(o, buf + f.start, f.end - f.start);
  }
  return 1;
}

/* nested lengths are rewritten after their content: each is built in its own buffer, then copied */
static void put_len_field(wire_out *o, uint64_t id, const wire_out *content) {
  out_varint(o, id << 3 | WIRE_LEN);
  out_varint(o, content->n);
  if (content->oom) o->oom = 1;
  else out_put(o, content->b, content->n);
}

pc_status ox_wire_strip(const uint8_t *buf, size_t len, size_t min_len, ox_wire_stripped *out, char *msg,
                        size_t cap) {
  memset(out, 0, sizeof *out);
  wire_field f;
  size_t pos = 0, graphs = 0, n_init = 0, stripped = 0;
  size_t gstart = 0, gend = 0;
  while (pos < len) {
    if (!next_field(buf, len, &pos, &f)) return PC_OK; /* malformed: unpacked as it is, and refused there */
    if (f.id == MODEL_GRAPH && f.wt == WIRE_LEN) graphs++, gstart = f.payload, gend = f.payload + f.len;
  }
  if (graphs != 1) return PC_OK; /* several graph fields merge in protobuf: left as they are */
  for (pos = gstart; pos < gend;) {
    if (!next_field(buf, gend, &pos, &f)) return PC_OK;
    n_init += f.id == GRAPH_INITIALIZER && f.wt == WIRE_LEN;
  }
  ox_raw_ref *refs = calloc(n_init + 1, sizeof *refs);
  wire_out model = {0}, graph = {0}, tensor = {0};
  if (!refs) return snprintf(msg, cap, "out of memory"), PC_ERR_NOMEM;
  size_t k = 0;
  for (pos = gstart; pos < gend;) {
    next_field(buf, gend, &pos, &f);
    if (!(f.id == GRAPH_INITIALIZER && f.wt == WIRE_LEN)) {
      out_put(&graph, buf + f.start, f.end - f.start);
      continue;
    }
    tensor.n = 0;
    stripped += strip_tensor(buf, f.payload, f.payload + f.len, min_len, &tensor, &refs[k++]);
    put_len_field(&graph, GRAPH_INITIALIZER, &tensor);
  }
  for (pos = 0; pos < len;) {
    next_field(buf, len, &pos, &f);
    if (f.id == MODEL_GRAPH && f.wt == WIRE_LEN) put_len_field(&model, MODEL_GRAPH, &graph);
    else out_put(&model, buf + f.start, f.end - f.start);
  }
  free(graph.b);
  free(tensor.b);
  if (model.oom || !stripped) {
    free(model.b);
    free(refs);
    if (model.oom) return snprintf(msg, cap, "out of memory"), PC_ERR_NOMEM;
    return PC_OK;
  }
  out->buf = model.b, out->len = model.n, out->refs = refs, out->n_refs = n_init;
  return PC_OK;
}
