# nlohmann/json from the system (Debian: nlohmann-json3-dev), or its include folder
# given as DASH_JSON_INCLUDE_DIR (bench/gpu.sh carries it to machines without it).
set(DASH_JSON_INCLUDE_DIR "" CACHE PATH "Folder holding nlohmann/json.hpp, instead of find_package")
if(DASH_JSON_INCLUDE_DIR)
  add_library(dash_nlohmann_json INTERFACE)
  target_include_directories(dash_nlohmann_json INTERFACE ${DASH_JSON_INCLUDE_DIR})
  add_library(nlohmann_json::nlohmann_json ALIAS dash_nlohmann_json)
else()
  find_package(nlohmann_json 3 REQUIRED)
endif()
