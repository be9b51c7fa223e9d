/* Spliced into zlib-ng's trees.c by buildtools/zlib_ng_patches.py (TREE_BUILDER),
   after its heap-based build_tree(), renamed build_tree_heap(). */

/* fastdeflate: code lengths by sorting and the in-place method of Moffat and Katajainen
   ("In-place calculation of minimum-redundancy codes", 1995) instead of a heap: the
   same total cost (any minimum-redundancy code has it), a fraction of the branches.
   When the longest code would exceed max_length, the heap builder (with zlib's length
   limiting) runs instead. */
static void build_tree(deflate_state *s, tree_desc *desc) {
    ct_data *tree           = desc->dyn_tree;
    const ct_data *stree    = desc->stat_desc->static_tree;
    const int *extra        = desc->stat_desc->extra_bits;
    int base                = desc->stat_desc->extra_base;
    int elems               = desc->stat_desc->elems;
    unsigned int max_length = desc->stat_desc->max_length;
    int *sym = s->heap;                 /* symbols, sorted by frequency */
    int *a = s->heap + L_CODES + 1;     /* frequencies, then code lengths */
    uint16_t count[512];
    int tmp[L_CODES];
    int n, cnt = 0, max_code = -1, node;
    unsigned maxf = 0, total;

    for (n = 0; n < elems; n++) {
        if (tree[n].Freq != 0) {
            tmp[cnt++] = max_code = n;
            if (tree[n].Freq > maxf)
                maxf = tree[n].Freq;
        } else {
            tree[n].Len = 0;
        }
    }
    while (cnt < 2) {  /* at least two codes, as in the heap builder */
        node = (max_code < 2 ? ++max_code : 0);
        tmp[cnt++] = node;
        tree[node].Freq = 1;
        if (maxf < 1)
            maxf = 1;
        s->opt_len--;
        if (stree)
            s->static_len -= stree[node].Len;
    }
    desc->max_code = max_code;

    /* stable counting sort of the symbols by frequency: in one pass on the frequency
       when it is small (the usual case for a message of a few KiB), else by its low
       and then its high byte */
    if (maxf < 512) {
        memset(count, 0, (maxf + 1) * sizeof(count[0]));
        for (n = 0; n < cnt; n++)
            count[tree[tmp[n]].Freq]++;
        for (n = 0, total = 0; n <= (int)maxf; n++) {
            unsigned c = count[n]; count[n] = (uint16_t)total; total += c;
        }
        for (n = 0; n < cnt; n++)
            sym[count[tree[tmp[n]].Freq]++] = tmp[n];
    } else {
        memset(count, 0, 512 * sizeof(count[0]));
        for (n = 0; n < cnt; n++) {
            count[tree[tmp[n]].Freq & 0xff]++;
            count[256 + (tree[tmp[n]].Freq >> 8)]++;
        }
        for (n = 0, total = 0; n < 256; n++) {
            unsigned c = count[n]; count[n] = (uint16_t)total; total += c;
        }
        for (n = 256, total = 0; n < 512; n++) {
            unsigned c = count[n]; count[n] = (uint16_t)total; total += c;
        }
        for (n = 0; n < cnt; n++)
            a[count[tree[tmp[n]].Freq & 0xff]++] = tmp[n];
        for (n = 0; n < cnt; n++) {
            int v = a[n];
            sym[count[256 + (tree[v].Freq >> 8)]++] = v;
        }
    }
    for (n = 0; n < cnt; n++)
        a[n] = tree[sym[n]].Freq;

    /* Moffat-Katajainen, in place on a[0..cnt-1] (ascending frequencies) */
    {
        int root = 0, leaf = 2, next, avbl, used, dpth;
        a[0] += a[1];
        for (next = 1; next < cnt - 1; next++) {
            if (leaf >= cnt || a[root] < a[leaf]) {
                a[next] = a[root];
                a[root++] = next;
            } else {
                a[next] = a[leaf++];
            }
            if (leaf >= cnt || (root < next && a[root] < a[leaf])) {
                a[next] += a[root];
                a[root++] = next;
            } else {
                a[next] += a[leaf++];
            }
        }
        a[cnt - 2] = 0;
        for (next = cnt - 3; next >= 0; next--)
            a[next] = a[a[next]] + 1;
        avbl = 1; used = dpth = 0; root = cnt - 2; next = cnt - 1;
        while (avbl > 0) {
            while (root >= 0 && a[root] == dpth) { used++; root--; }
            while (avbl > used) { a[next--] = dpth; avbl--; }
            avbl = 2 * used; dpth++; used = 0;
        }
    }
    if ((unsigned)a[0] > max_length) {  /* too long: the heap builder limits lengths */
        build_tree_heap(s, desc);
        return;
    }
    for (n = 0; n <= MAX_BITS; n++)
        s->bl_count[n] = 0;
    for (n = 0; n < cnt; n++) {
        int m = sym[n];
        unsigned int bits = (unsigned int)a[n];
        int xbits = m >= base ? extra[m - base] : 0;
        uint16_t f = tree[m].Freq;
        tree[m].Len = (uint16_t)bits;
        s->bl_count[bits]++;
        s->opt_len += (unsigned long)f * (unsigned int)(bits + xbits);
        if (stree)
            s->static_len += (unsigned long)f * (unsigned int)(stree[m].Len + xbits);
    }
    gen_codes((ct_data *)tree, max_code, s->bl_count);
}

