# Included by zlib-ng's CMakeLists.txt right after its project() (CMAKE_PROJECT_INCLUDE):
# zlib-ng's inflate loops (inflate_fast_* in the arch/*/chunkset_* sources) are compiled
# at -O3. zlib-ng builds Release at -O2, where GCC keeps the chunk-copy helpers out of
# inflate_fast (3 KiB of code instead of 10 KiB): inflating 1-16 KB JSON messages took
# ~10% longer here. The rest stays at -O2: built all at -O3, deflate was slower with many
# connections (100 round-robin at window 15: ~20% more time). MSVC keeps its own flags.
if(NOT MSVC)
    file(GLOB _fastdeflate_inflate_fast
         "${CMAKE_CURRENT_SOURCE_DIR}/arch/*/chunkset_*.c")
    set_property(SOURCE ${_fastdeflate_inflate_fast} APPEND PROPERTY COMPILE_OPTIONS -O3)
endif()
