/* frontend/onnx_wire.c: walks protobuf wire data before protobuf-c unpacks it, so that bytes protobuf-c would
 * crash on (messages nested thousands deep overflow its recursive unpack) are refused with a message. */
#include "frontend/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>

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
